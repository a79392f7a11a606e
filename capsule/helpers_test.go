package capsule

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/tern-dev/tern/journal"
)

// testSigner is a machine key that lives in memory.
type testSigner struct {
	priv crypto.PrivKey
	id   string
}

func newSigner(t testing.TB) *testSigner {
	t.Helper()
	priv, _, err := crypto.GenerateEd25519Key(nil)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return &testSigner{priv: priv, id: id.String()}
}

func (s *testSigner) Machine() string                 { return s.id }
func (s *testSigner) Sign(msg []byte) ([]byte, error) { return s.priv.Sign(msg) }

var _ journal.Signer = (*testSigner)(nil)

func draft(t testing.TB, typ, session string, body any) journal.Draft {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	return journal.Draft{Type: typ, Session: session, Turn: "t1", Body: b}
}

func userMessage(t testing.TB, text string) journal.Draft {
	return draft(t, "message", "s1", map[string]any{"role": "user", "content": []map[string]string{{"type": "text", "text": text}}})
}

// writeTree creates files (path → content) under root; a path ending in
// "/" makes an empty folder.
func writeTree(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if name[len(name)-1] == '/' {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fullCapsule makes a capsule the way a user does: new, append a
// conversation, snapshot a workspace. It returns the capsule folder.
func fullCapsule(t testing.TB, s *testSigner) string {
	t.Helper()
	dir := emptyCapsule(t, s, "helper")
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	if _, err := d.Append(ctx, s, 0,
		userMessage(t, "hello"),
		draft(t, "tool_call", "s1", map[string]any{"call_id": "c1", "name": "ls", "arguments": map[string]any{}}),
		draft(t, "tool_result", "s1", map[string]any{"call_id": "c1", "content": []any{}, "is_error": false}),
	); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"a.txt": "alpha\n", "sub/b.bin": "\x00\x01\x02beta", "empty/": ""})
	if _, err := d.Snapshot(ctx, s, ws); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mustVerify(t testing.TB, path string) *Report {
	t.Helper()
	rep, err := Verify(path, VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verify %s: %v", path, rep.Problems)
	}
	return rep
}

// emptyCapsule creates a new capsule named name, held by s's machine, in
// a temporary folder, and returns its path.
func emptyCapsule(t testing.TB, s *testSigner, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "agent")
	c, err := New(dir, name, s)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	return dir
}

func mustOpen(t testing.TB, path string) *Capsule {
	t.Helper()
	c, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func packTo(t testing.TB, path, out string, opt PackOptions) []byte {
	t.Helper()
	c := mustOpen(t, path)
	if err := PackFile(c, out, opt); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// addMember has by add peer to the members of the capsule at dir.
func addMember(t testing.TB, dir string, by, peer journal.Signer) {
	t.Helper()
	d, err := OpenDir(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	body, _ := json.Marshal(journal.MemberBody{Peer: peer.Machine()})
	if _, err := d.AppendReserved(context.Background(), by, 0, journal.Draft{Type: journal.MemberAddedType, Body: body}); err != nil {
		t.Fatal(err)
	}
}
