package protocol

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"

	"github.com/tern-dev/tern/fencing"
)

// transports are the two a node listens on by default; between two
// machines libp2p prefers QUIC. A host of one listens on that one only, so
// that it is the one used.
var transports = []struct{ name, listen string }{
	{"tcp", "/ip4/127.0.0.1/tcp/0"},
	{"quic", "/ip4/127.0.0.1/udp/0/quic-v1"},
}

// hostOn starts a real libp2p host on 127.0.0.1 listening on one transport.
func hostOn(t *testing.T, listen string) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings(listen), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

// failures is a log handler that keeps what a server logged at Debug and
// above about a request that failed: a server logs each stream it resets.
type failures struct {
	mu   sync.Mutex
	msgs []string
}

func (f *failures) Enabled(context.Context, slog.Level) bool { return true }
func (f *failures) Handle(_ context.Context, r slog.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := r.Message
	r.Attrs(func(a slog.Attr) bool { s += " " + a.String(); return true })
	f.msgs = append(f.msgs, s)
	return nil
}
func (f *failures) WithAttrs([]slog.Attr) slog.Handler { return f }
func (f *failures) WithGroup(string) slog.Handler      { return f }
func (f *failures) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.msgs...)
}

// migrateStub answers the migrate protocol's three requests.
type migrateStub struct {
	mu        sync.Mutex
	delivered int
}

func (m *migrateStub) Deliver(string, fencing.Message) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.delivered++
	return nil
}
func (m *migrateStub) Pull(context.Context, string, string, uint64) (Pulled, error) {
	return Pulled{Bytes: 7}, nil
}
func (m *migrateStub) HolderOf(string) (HolderState, error) {
	return HolderState{State: "active", Epoch: 3}, nil
}

// Every exchange of every protocol ends cleanly on both transports, many
// times in a row: a request whose answer was read whole never fails
// because of how its stream closed, and the server resets nothing. (Over
// QUIC, closing a stream the peer has stopped reading fails with "close
// called for canceled stream", which made every answered request fail
// some of the time.)
func TestEveryExchangeEndsCleanlyOverTCPAndQUIC(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			server, client := hostOn(t, tr.listen), hostOn(t, tr.listen)
			logged := &failures{}
			log := slog.New(logged)
			journals := newMem(agent)
			newWriter(t).append(t, journals, 5)
			blob, sum := randomBlob(3*BlobChunk + 5)
			tarBytes := bytes.Repeat([]byte("tar!"), 3000)
			stub := &migrateStub{}
			HandleSync(server, journals, log)
			HandleBlob(server, memBlobs{sum: blob}, log)
			HandleCapsules(server, memCapsules{agent: tarBytes}, log)
			HandleMigrate(server, stub, log)
			connect(t, client, server)
			if got := client.Network().ConnsToPeer(server.ID())[0].RemoteMultiaddr().String(); !bytes.Contains([]byte(got), []byte(tr.name)) {
				t.Fatalf("connected over %s, want %s", got, tr.name)
			}
			ctx := context.Background()
			p := server.ID()
			dir := t.TempDir()
			const rounds = 40
			for i := range rounds {
				mine := newMem(agent)
				if _, err := Sync(ctx, client, p, agent, mine); err != nil {
					t.Fatalf("round %d: sync: %v", i, err)
				}
				partial := filepath.Join(dir, fmt.Sprint("blob", i))
				if n, err := Fetch(ctx, client, p, memAgent, sum, partial, nil); err != nil || n != int64(len(blob)) {
					t.Fatalf("round %d: blob fetch: %d bytes, %v", i, n, err)
				}
				if held, err := PeerHas(ctx, client, p, memAgent, []string{sum}); err != nil || len(held) != 1 {
					t.Fatalf("round %d: have query: %v %v", i, held, err)
				}
				if ids, _, err := PeerCapsules(ctx, client, p); err != nil || len(ids) != 1 {
					t.Fatalf("round %d: capsule list: %v %v", i, ids, err)
				}
				var tar bytes.Buffer
				if _, err := TakeCapsule(ctx, client, p, agent, true, &tar, 1<<20); err != nil || !bytes.Equal(tar.Bytes(), tarBytes) {
					t.Fatalf("round %d: capsule copy: %d bytes, %v", i, tar.Len(), err)
				}
				if st, err := AskHolder(ctx, client, p, agent); err != nil || st.Epoch != 3 {
					t.Fatalf("round %d: holder state: %+v %v", i, st, err)
				}
				if pulled, err := AskPull(ctx, client, p, agent, 1); err != nil || pulled.Bytes != 7 {
					t.Fatalf("round %d: pull: %+v %v", i, pulled, err)
				}
				msg := fencing.Message{Type: fencing.MsgAsk, From: client.ID().String(), To: p.String(), Agent: agent, Nonce: 1}
				if err := SendMigrate(ctx, client, p, msg); err != nil {
					t.Fatalf("round %d: fencing message: %v", i, err)
				}
			}
			stub.mu.Lock()
			delivered := stub.delivered
			stub.mu.Unlock()
			if delivered != rounds {
				t.Fatalf("%d fencing messages delivered, want %d", delivered, rounds)
			}
			for _, m := range logged.list() {
				if bytes.Contains([]byte(m), []byte("fail")) {
					t.Errorf("the server logged a failed request: %s", m)
				}
			}
		})
	}
}
