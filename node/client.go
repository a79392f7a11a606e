package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
)

// ErrNotRunning means no node is running for this $TERN_HOME.
var ErrNotRunning = errors.New("no tern node is running for this TERN_HOME (start one with: tern node)")

// Client talks to the node of a $TERN_HOME through the API that node.json
// names.
type Client struct {
	info Info
	http *http.Client
}

// Dial reads home's node.json. It returns ErrNotRunning when there is none.
func Dial(home string) (*Client, error) {
	data, err := os.ReadFile(filepath.Join(home, InfoFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, ErrNotRunning
	}
	if err != nil {
		return nil, err
	}
	var info Info
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: %v", filepath.Join(home, InfoFile), err)
	}
	return &Client{info: info, http: &http.Client{}}, nil
}

// Do sends a request to the node and decodes a JSON answer into out (if
// not nil). An error answer becomes an error carrying the node's message.
func (c *Client) Do(ctx context.Context, method, path string, body io.Reader, out any) error {
	resp, err := c.Raw(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// Raw sends a request and returns the response of a successful call; the
// caller closes its body.
func (c *Client) Raw(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.info.API+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.info.Token)
	resp, err := c.http.Do(req)
	if err != nil {
		if strings.Contains(err.Error(), "connection refused") {
			return nil, fmt.Errorf("%w: node.json names %s but nothing answers there", ErrNotRunning, c.info.API)
		}
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		return nil, &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	return resp, nil
}

// APIError is an error answer of the node's API.
type APIError struct {
	Status  int
	Message string
}

func (e *APIError) Error() string { return e.Message }
