package api

import (
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

func TestHomeRelativeNamesPathsInsideTheHomeRelativeToIt(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "home")
	if err := os.Symlink(real, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
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
			if got := HomeRelative(link, tc.in); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
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
		{"an agent the node does not hold", StatusOf, wrap(ErrUnknownAgent), http.StatusNotFound},
		{"an invalid draft", StatusOf, wrap(journal.ErrInvalidDraft), http.StatusBadRequest},
		{"this machine's chain forked", StatusOf, wrap(journal.ErrFork), http.StatusConflict},
		{"this machine's chain broken", StatusOf, wrap(journal.ErrBrokenChain), http.StatusConflict},
		{"a closed store", StatusOf, wrap(ErrStoreClosed), http.StatusServiceUnavailable},
		{"a closed journal", StatusOf, wrap(journal.ErrClosed), http.StatusServiceUnavailable},
		{"a full disk", StatusOf, wrap(disk), http.StatusInternalServerError},
		{"a damaged capsule the node holds", StatusOf, wrap(capsule.ErrHashMismatch), http.StatusInternalServerError},
		{"anything else", StatusOf, errors.New("?"), http.StatusInternalServerError},
		{"an accept of an edit of a file only tern writes", StatusOf, wrap(capsule.ErrNotEditable), http.StatusConflict},
		{"a model API that failed", StatusOf, wrap(&provider.Error{Kind: provider.ErrUnavailable}), http.StatusBadGateway},
		{"a session the node does not hold", StatusOf, wrap(session.ErrNoSession), http.StatusNotFound},
		{"an answer to a turn that waits for others", StatusOf, wrap(session.ErrPartialAnswers), http.StatusUnprocessableEntity},
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
