package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tern-dev/tern/internal/sse"
)

// ErrNotRunning means no node is running for this $TERN_HOME.
var ErrNotRunning = errors.New("no tern node is running for this TERN_HOME (start one with: tern node)")

// Client talks to the node of a $TERN_HOME through the API that node.json
// names.
type Client struct {
	home string
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
	return &Client{home: home, info: info, http: &http.Client{}}, nil
}

// redial reads node.json again: a node that restarted has a new API
// address and token.
func (c *Client) redial() {
	if fresh, err := Dial(c.home); err == nil {
		c.info = fresh.info
	}
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

// TurnItem is one server-sent event of a turn's stream: an event of the
// turn (Seq its sequence number) or, with Seq 0, a delta of the model step
// in flight or the "moved" notice.
type TurnItem struct {
	Seq   int
	Event string // the journal event's type, "delta" or "moved"
	Data  json.RawMessage
}

// FollowTurn reads the turn's events after sequence number after, calling
// each for every item, until the turn ends (its turn.ended item) or the
// agent moves (a "moved" item: it returns the new holder's peer ID). A
// stream that breaks before either is resumed from the last item it gave,
// so each item arrives once, for as long as it keeps making progress or
// for 30 s without (the node restarting: node.json is read again).
func (c *Client) FollowTurn(ctx context.Context, sessionID, turnID string, after int, each func(TurnItem) error) (movedTo string, err error) {
	failures := 0
	stalled := time.Now()
	for {
		progressed, moved, ended, err := c.followOnce(ctx, sessionID, turnID, &after, each)
		switch {
		case moved != "":
			return moved, nil
		case ended:
			return "", nil
		case ctx.Err() != nil:
			return "", ctx.Err()
		}
		var api *APIError
		var stop stopError
		if errors.As(err, &stop) {
			return "", stop.err
		}
		if errors.As(err, &api) && api.Status != http.StatusServiceUnavailable {
			return "", err
		}
		if progressed {
			failures, stalled = 0, time.Now()
		} else if failures++; time.Since(stalled) > 30*time.Second {
			if err == nil {
				err = errors.New("the stream ended before the turn did")
			}
			return "", fmt.Errorf("following turn %s: %w", turnID, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(time.Duration(min(failures, 10)) * 200 * time.Millisecond):
		}
		c.redial()
	}
}

// stopError carries an error of the caller's each: following stops with it.
type stopError struct{ err error }

func (e stopError) Error() string { return e.err.Error() }

func (c *Client) followOnce(ctx context.Context, sessionID, turnID string, after *int, each func(TurnItem) error) (progressed bool, moved string, ended bool, err error) {
	path := fmt.Sprintf("/v1/sessions/%s/turns/%s/events?after=%d", url.PathEscape(sessionID), url.PathEscape(turnID), *after)
	resp, err := c.Raw(ctx, http.MethodGet, path, nil)
	if err != nil {
		return false, "", false, err
	}
	defer resp.Body.Close()
	frames := sse.NewReader(resp.Body, MaxFrame)
	for {
		f, err := frames.Next()
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return progressed, "", false, nil // FollowTurn resumes it
		}
		if err != nil {
			return progressed, "", false, err
		}
		if f.Event == "" {
			continue
		}
		it := TurnItem{Event: f.Event, Data: json.RawMessage(f.Data)}
		it.Seq, _ = strconv.Atoi(f.ID)
		if it.Seq > 0 {
			if it.Seq <= *after {
				continue // already given
			}
			*after = it.Seq
			progressed = true
		}
		if it.Event == "moved" {
			var m struct {
				Peer string `json:"peer"`
			}
			json.Unmarshal(it.Data, &m)
			return progressed, orNone(m.Peer), false, nil
		}
		if err := each(it); err != nil {
			return progressed, "", false, stopError{err}
		}
		if it.Event == "turn.ended" {
			return progressed, "", true, nil
		}
	}
}
