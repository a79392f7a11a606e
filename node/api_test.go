package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/journal"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/session"
)

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

func TestTheAPIAnswersOnlyToItsOwnLoopbackHostAndOrigin(t *testing.T) {
	served := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := loopbackOnly("127.0.0.1", "7420", served)
	for _, tc := range []struct {
		name, host, origin string
		refused            string // what the error names; "" if served
	}{
		{name: "127.0.0.1 with the API's port and no Origin is served", host: "127.0.0.1:7420"},
		{name: "localhost is served", host: "localhost:7420"},
		{name: "LOCALHOST is served, names being case-blind", host: "LOCALHOST:7420"},
		{name: "[::1] is served", host: "[::1]:7420"},
		{name: "the API's own Origin is served", host: "127.0.0.1:7420", origin: "http://127.0.0.1:7420"},
		{name: "an Origin of another loopback name is served", host: "127.0.0.1:7420", origin: "http://localhost:7420"},
		{name: "a rebound name is refused", host: "evil.example:7420", refused: `Host "evil.example:7420"`},
		{name: "a loopback name with another port is refused", host: "127.0.0.1:7421", refused: `Host "127.0.0.1:7421"`},
		{name: "a host without the API's port is refused", host: "localhost", refused: `Host "localhost"`},
		{name: "a LAN address is refused", host: "192.168.1.20:7420", refused: `Host "192.168.1.20:7420"`},
		{name: "a foreign Origin is refused", host: "127.0.0.1:7420", origin: "http://evil.example", refused: `Origin "http://evil.example"`},
		{name: "a foreign Origin on the API's port is refused", host: "127.0.0.1:7420", origin: "http://evil.example:7420", refused: `Origin "http://evil.example:7420"`},
		{name: "an Origin with another port is refused", host: "127.0.0.1:7420", origin: "http://localhost:3000", refused: `Origin "http://localhost:3000"`},
		{name: "an https Origin is refused", host: "127.0.0.1:7420", origin: "https://localhost:7420", refused: `Origin "https://localhost:7420"`},
		{name: "an opaque Origin is refused", host: "127.0.0.1:7420", origin: "null", refused: `Origin "null"`},
		{name: "an Origin with user info is refused", host: "127.0.0.1:7420", origin: "http://evil@localhost:7420", refused: `Origin "http://evil@localhost:7420"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/v1/status", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			resp := w.Result()
			if tc.refused == "" {
				if resp.StatusCode != http.StatusNoContent {
					t.Fatalf("refused with %d: %s", resp.StatusCode, apiError(t, resp))
				}
				return
			}
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("answered %d, want 403", resp.StatusCode)
			}
			if msg := apiError(t, resp); !strings.Contains(msg, tc.refused) || !strings.Contains(msg, "refused") {
				t.Fatalf("error %q does not say %s was refused", msg, tc.refused)
			}
		})
	}
}

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
	if err := os.WriteFile(filepath.Join(n.home, CapsulesDir, agent, capsule.ManifestFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Closed after the damage (the node's own work may have it open), so
	// that the next use reads the damage.
	eventually(t, "the capsule is closed", func() bool {
		n.store.CloseIdle(0)
		n.store.mu.Lock()
		defer n.store.mu.Unlock()
		_, open := n.store.open[agent]
		return !open
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
			if !strings.Contains(msg, CapsulesDir+"/"+agent) {
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

func TestHomeRelativeNamesPathsInsideTheHomeRelativeToIt(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	n := &Node{home: link}
	for _, tc := range []struct{ name, in, want string }{
		{"a file under the home as given", "open " + link + "/capsules/x/manifest.json: denied", "open capsules/x/manifest.json: denied"},
		{"a file under the home's real path", "read " + real + "/peers.json: bad", "read peers.json: bad"},
		{"the home itself", "mkdir " + link + ": denied", "mkdir $TERN_HOME: denied"},
		{"the home with a separator after it", "open " + link + "/: denied", "open $TERN_HOME: denied"},
		{"a path quoted", `open "` + link + `/x"`, `open "x"`},
		{"a doubled separator left by a join", "open " + link + "//x: denied", "open x: denied"},
		{"two paths", "rename " + link + "/a " + real + "/b: denied", "rename a b: denied"},
		{"a path outside the home", "open /etc/hosts: denied", "open /etc/hosts: denied"},
		{"a sibling whose name starts like the home", "open " + link + "2/x: denied", "open " + link + "2/x: denied"},
		{"a path that holds the home's path further in", "open /mnt" + real + "/x: denied", "open /mnt" + real + "/x: denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := n.homeRelative(tc.in); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
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
		{"an append of a line over the limit is 413", http.MethodPost, "/v1/capsules/" + held + "/events", strings.Repeat(" ", maxDraftLine+1), http.StatusRequestEntityTooLarge},
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

func TestStatusesOfErrorsTellTheClientsFaultFromTheNodes(t *testing.T) {
	importStatus := func(err error) int { return statusOr(err, http.StatusBadRequest) } // as the import handler answers
	disk := &fs.PathError{Op: "write", Path: "/somewhere", Err: syscall.ENOSPC}
	wrap := func(err error) error { return fmt.Errorf("agent x: %w", err) }
	for _, tc := range []struct {
		name   string
		status func(error) int
		err    error
		want   int
	}{
		{"an agent the node does not hold", statusOf, wrap(ErrUnknownAgent), http.StatusNotFound},
		{"an invalid draft", statusOf, wrap(journal.ErrInvalidDraft), http.StatusBadRequest},
		{"this machine's chain forked", statusOf, wrap(journal.ErrFork), http.StatusConflict},
		{"this machine's chain broken", statusOf, wrap(journal.ErrBrokenChain), http.StatusConflict},
		{"a closed store", statusOf, wrap(ErrStoreClosed), http.StatusServiceUnavailable},
		{"a closed journal", statusOf, wrap(journal.ErrClosed), http.StatusServiceUnavailable},
		{"a full disk", statusOf, wrap(disk), http.StatusInternalServerError},
		{"a damaged capsule the node holds", statusOf, wrap(capsule.ErrHashMismatch), http.StatusInternalServerError},
		{"anything else", statusOf, errors.New("?"), http.StatusInternalServerError},
		{"an accept of an edit of a file only tern writes", statusOf, wrap(capsule.ErrNotEditable), http.StatusConflict},
		{"a model API that failed", statusOf, wrap(&provider.Error{Kind: provider.ErrUnavailable}), http.StatusBadGateway},
		{"a session the node does not hold", statusOf, wrap(session.ErrNoSession), http.StatusNotFound},
		{"an answer to a turn that waits for others", statusOf, wrap(session.ErrPartialAnswers), http.StatusUnprocessableEntity},
		{"an import of an unsafe tar", importStatus, wrap(capsule.ErrUnsafeTar), http.StatusBadRequest},
		{"an import of what is not a capsule", importStatus, wrap(capsule.ErrNotCapsule), http.StatusBadRequest},
		{"an import that fails a check", importStatus, errors.New(`unpack the uploaded tar: entry "agent.json": altered`), http.StatusBadRequest},
		{"an import that cannot merge", importStatus, wrap(capsule.ErrDiverged), http.StatusConflict},
		{"an import onto a full disk", importStatus, wrap(disk), http.StatusInternalServerError},
		{"an import into a closed store", importStatus, ErrStoreClosed, http.StatusServiceUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.status(tc.err); got != tc.want {
				t.Fatalf("%v: %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}
