package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
)

// mapSecrets is a secret store in a map.
type mapSecrets map[string]string

func (m mapSecrets) Get(name string) (string, error) {
	if v, ok := m[name]; ok {
		return v, nil
	}
	return "", os.ErrNotExist
}

// syncBuffer is a log destination safe for the node's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A node reaches its agent's model with the key from its secrets, and
// after a refused key and a good one, the key is nowhere in its home,
// its logs or its API's answers.
func TestTheNodeProbesTheModelAndTheKeyLeavesNoTrace(t *testing.T) {
	const key = "sk-node-test-key-9f8e7d6c5b4a39281706"
	var refuse sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, `{"error":{"message":"no key"}}`, 400)
			return
		}
		if _, no := refuse.Load("yes"); no {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"error":{"message":"Incorrect API key provided: `+key+`"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"OK\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()

	home := t.TempDir()
	var logs syncBuffer
	n, err := Start(home, Config{Listen: []string{"/ip4/127.0.0.1/tcp/0"}, NoMDNS: true, SyncInterval: time.Hour,
		Secrets: mapSecrets{"LOCAL_KEY": key}}, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	agent := heldBy(t, n, func(dir string) {
		acceptEdit(t, n, dir, capsule.AgentFile, `{"name":"prober","instructions":"","provider":"openai-chat","model":"local-model",`+
			`"base_url":"`+srv.URL+`/v1","key_secret":"LOCAL_KEY","tools":[]}`+"\n")
	})
	cl, err := api.Dial(home)
	if err != nil {
		t.Fatal(err)
	}
	var answers []string
	probe := func() error {
		var p json.RawMessage
		err := cl.Do(context.Background(), http.MethodPost, "/v1/capsules/"+agent+"/model/test", nil, &p)
		answers = append(answers, string(p))
		if err != nil {
			answers = append(answers, err.Error())
		}
		return err
	}
	if err := probe(); err != nil || !strings.Contains(answers[0], `"reply":"OK"`) {
		t.Fatalf("probe: %v %s", err, answers[0])
	}
	refuse.Store("yes", true)
	err = probe()
	var api *api.APIError
	if !errors.As(err, &api) || api.Status != http.StatusBadGateway || !strings.Contains(api.Message, "LOCAL_KEY") {
		t.Fatalf("a refused key: %v; want 502 naming the secret", err)
	}
	n.Close()
	if strings.Contains(logs.String(), key) {
		t.Error("the logs hold the key")
	}
	for _, a := range answers {
		if strings.Contains(a, key) {
			t.Errorf("an API answer holds the key: %s", a)
		}
	}
	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(key)) {
				t.Errorf("%s holds the key", path)
			}
		}
		return nil
	})
}
