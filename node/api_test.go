package node

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
