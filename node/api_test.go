package node

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/store"
)

func TestARunningNodeRefusesAForeignHostOrOriginOnEveryRoute(t *testing.T) {
	n := startNode(t, t.TempDir())
	port := n.info.API[strings.LastIndexByte(n.info.API, ':')+1:]
	for _, path := range []string{"/v1/status", "/metrics"} {
		for _, tc := range []struct {
			name, host, origin string
			want               int
		}{
			{"the API's own address", "", "", http.StatusOK},
			{"a good Origin", "", "http://localhost:" + port, http.StatusOK},
			{"a rebound name", "rebind.example:" + port, "", http.StatusForbidden},
			{"another port", "127.0.0.1:1", "", http.StatusForbidden},
			{"a foreign Origin", "", "http://rebind.example:" + port, http.StatusForbidden},
		} {
			t.Run(path+" with "+tc.name, func(t *testing.T) {
				req, _ := http.NewRequest(http.MethodGet, n.info.API+path, nil)
				req.Header.Set("Authorization", "Bearer "+n.info.Token)
				if tc.host != "" {
					req.Host = tc.host
				}
				if tc.origin != "" {
					req.Header.Set("Origin", tc.origin)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Fatalf("answered %d, want %d", resp.StatusCode, tc.want)
				}
				if tc.want == http.StatusForbidden {
					apiError(t, resp)
				}
			})
		}
	}
}

// call sends an authorized request to n's API and returns the status and
// the body.
func call(t testing.TB, n *Node, method, path string, body io.Reader) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, n.info.API+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+n.info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, data
}

// errorOf returns the "error" of an error answer's body.
func errorOf(t *testing.T, code int, body []byte) string {
	t.Helper()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" || code < 400 {
		t.Fatalf("%d %q is not an error answer", code, body)
	}
	return e.Error
}

// noHomePath fails if msg names n's home or the temporary folder by an
// absolute path.
func noHomePath(t *testing.T, n *Node, msg string) {
	t.Helper()
	abs, _ := filepath.Abs(n.home)
	real, _ := filepath.EvalSymlinks(abs)
	for _, p := range []string{n.home, abs, real, os.TempDir()} {
		if strings.Contains(msg, p) {
			t.Fatalf("error %q names the absolute path %s", msg, p)
		}
	}
}

func TestAnErrorFromADamagedCapsuleNamesItsFilesRelativeToTheHome(t *testing.T) {
	n := startNode(t, t.TempDir())
	agent := sharedCapsule(t, n)
	if err := os.WriteFile(filepath.Join(n.home, store.CapsulesDir, agent, capsule.ManifestFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Closed after the damage (the node's own work may have it open), so
	// that the next use reads the damage.
	eventually(t, "the capsule is closed", func() bool {
		n.store.CloseIdle(0)
		return !n.store.IsOpen(agent)
	})
	for _, tc := range []struct{ name, method, path, body string }{
		{"an append", http.MethodPost, "/v1/capsules/" + agent + "/events", `{"type":"message","body":{"role":"user","content":[{"type":"text","text":"hi"}]}}`},
		{"an export", http.MethodGet, "/v1/capsules/" + agent + "/export", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(t, n, tc.method, tc.path, strings.NewReader(tc.body))
			msg := errorOf(t, code, body)
			if code != http.StatusInternalServerError {
				t.Errorf("answered %d: a damaged capsule of the node's own is the node's failure, 500", code)
			}
			noHomePath(t, n, msg)
			if !strings.Contains(msg, store.CapsulesDir+"/"+agent) {
				t.Fatalf("error %q does not name the capsule's folder relative to the home", msg)
			}
		})
	}
}

func TestABadUploadIsCalledTheUploadedTarAndNamesNoPath(t *testing.T) {
	n := startNode(t, t.TempDir())
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := capsule.New(dir, "tampered", n.id)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	tarPath := filepath.Join(t.TempDir(), "agent.tar")
	src, err := capsule.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = capsule.PackFile(src, tarPath, capsule.PackOptions{})
	src.Close()
	if err != nil {
		t.Fatal(err)
	}
	good, err := os.ReadFile(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	// The agent's name is in agent.json, whose hash the manifest lists.
	tampered := bytes.Replace(good, []byte(`"tampered"`), []byte(`"Tampered"`), 1)
	if bytes.Equal(tampered, good) {
		t.Fatal("the tar does not hold the agent's name")
	}
	for _, tc := range []struct {
		name string
		body []byte
	}{
		{"bytes that are not a tar", []byte("not a tar at all")},
		{"a tar cut short", good[:len(good)/2]},
		{"a tar whose agent.json was altered", tampered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(t, n, http.MethodPost, "/v1/capsules", bytes.NewReader(tc.body))
			msg := errorOf(t, code, body)
			noHomePath(t, n, msg)
			if !strings.Contains(msg, "the uploaded tar") || strings.Contains(msg, ".upload-") {
				t.Fatalf("error %q does not call the upload the uploaded tar", msg)
			}
		})
	}
}

func TestTheAPIsStatusesSayWhoseFaultAnErrorIs(t *testing.T) {
	n := startNode(t, t.TempDir())
	held := sharedCapsule(t, n)
	const absent = "00000000-0000-4000-8000-000000000000"
	for _, tc := range []struct {
		name, method, path, body string
		want                     int
	}{
		{"an export of an agent the node does not hold is 404", http.MethodGet, "/v1/capsules/" + absent + "/export", "", http.StatusNotFound},
		{"an export of what is not an agent id is 400", http.MethodGet, "/v1/capsules/not-an-id/export", "", http.StatusBadRequest},
		{"an append to an agent the node does not hold is 404", http.MethodPost, "/v1/capsules/" + absent + "/events", `{"type":"message","body":{"role":"user","content":[{"type":"text","text":"hi"}]}}`, http.StatusNotFound},
		{"an append of a line that is not a draft is 400", http.MethodPost, "/v1/capsules/" + held + "/events", `{"body":{}}`, http.StatusBadRequest},
		{"an append of a line over the limit is 413", http.MethodPost, "/v1/capsules/" + held + "/events", strings.Repeat(" ", api.MaxDraftLine+1), http.StatusRequestEntityTooLarge},
		{"a sync state for what is not a peer ID is 400", http.MethodGet, "/v1/capsules/" + held + "/sync?peer=nobody", "", http.StatusBadRequest},
		{"a sync state of an agent the node does not hold is 404", http.MethodGet, "/v1/capsules/" + absent + "/sync?peer=" + n.info.PeerID, "", http.StatusNotFound},
		{"an import of bytes that are not a tar is 400", http.MethodPost, "/v1/capsules", "not a tar", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(t, n, tc.method, tc.path, strings.NewReader(tc.body))
			if msg := errorOf(t, code, body); code != tc.want {
				t.Fatalf("answered %d (%s), want %d", code, msg, tc.want)
			}
		})
	}
	// Once the store is closed (the node is shutting down), the node
	// cannot serve, whatever the request.
	if err := n.store.Close(); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/status", "/v1/capsules/" + held + "/export"} {
		if code, body := call(t, n, http.MethodGet, path, nil); code != http.StatusServiceUnavailable {
			t.Errorf("%s on a closed store answered %d %s, want 503", path, code, body)
		}
	}
}

// apiError reads an error answer of the API, failing unless it is JSON
// with a non-empty "error".
func apiError(t *testing.T, resp *http.Response) string {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e struct {
		Error string `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == "" {
		t.Fatalf("%d answer is not a JSON error: %q", resp.StatusCode, body)
	}
	return e.Error
}
