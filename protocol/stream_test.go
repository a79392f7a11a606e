package protocol

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/libp2p/go-libp2p"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
)

// newHost starts a real libp2p host on 127.0.0.1 (TCP, Noise, yamux).
func newHost(t *testing.T) host.Host {
	t.Helper()
	h, err := libp2p.New(libp2p.ListenAddrStrings("/ip4/127.0.0.1/tcp/0"), libp2p.DisableRelay())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func connect(t *testing.T, a, b host.Host) {
	t.Helper()
	if err := a.Connect(context.Background(), peer.AddrInfo{ID: b.ID(), Addrs: b.Addrs()}); err != nil {
		t.Fatal(err)
	}
}

func TestTwoRealHostsSyncAJournalOverAStream(t *testing.T) {
	ha, hb := newHost(t), newHost(t)
	a, b := newMem(agent), newMem(agent)
	newWriter(t).append(t, a, 40)
	newWriter(t).append(t, b, 25)
	HandleSync(hb, b, slog.New(slog.DiscardHandler))
	connect(t, ha, hb)
	stats, err := Sync(context.Background(), ha, hb.ID(), agent, a)
	if err != nil {
		t.Fatal(err)
	}
	if a.ids(agent) != b.ids(agent) || len(a.events[agent]) != 65 {
		t.Fatalf("not converged: %d vs %d (stats %+v)", len(a.events[agent]), len(b.events[agent]), stats)
	}
}

func TestSyncOfAnAgentThePeerDoesNotShareFails(t *testing.T) {
	ha, hb := newHost(t), newHost(t)
	a := newMem(agent)
	newWriter(t).append(t, a, 2)
	HandleSync(hb, newMem(), slog.New(slog.DiscardHandler))
	connect(t, ha, hb)
	if _, err := Sync(context.Background(), ha, hb.ID(), agent, a); err == nil {
		t.Fatal("sync of an unshared agent succeeded")
	}
}

func TestAMalformedOrOversizedFrameResetsTheStreamAndTheNodeKeepsServing(t *testing.T) {
	server, attacker, honest := newHost(t), newHost(t), newHost(t)
	b := newMem(agent)
	newWriter(t).append(t, b, 5)
	HandleSync(server, b, slog.New(slog.DiscardHandler))
	connect(t, attacker, server)
	connect(t, honest, server)

	for name, frame := range map[string][]byte{
		"an oversized frame": binary.AppendUvarint(nil, MaxSyncFrame+1),
		"a hello that is not JSON": func() []byte {
			var buf bytes.Buffer
			WriteFrame(&buf, append([]byte{tagHello}, "{{{"...))
			return buf.Bytes()
		}(),
		"an unknown tag": func() []byte {
			var buf bytes.Buffer
			WriteFrame(&buf, []byte("Zzz"))
			return buf.Bytes()
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			s, err := attacker.NewStream(context.Background(), server.ID(), SyncID)
			if err != nil {
				t.Fatal(err)
			}
			s.Write(frame)
			s.CloseWrite()
			buf := make([]byte, 16)
			_, err = io.ReadFull(s, buf)
			if err == nil {
				t.Fatal("the server answered a malformed stream")
			}
			s.Reset()
		})
	}
	// The server still serves an honest peer.
	a := newMem(agent)
	if _, err := Sync(context.Background(), honest, server.ID(), agent, a); err != nil {
		t.Fatalf("honest sync after the attacks: %v", err)
	}
	if a.ids(agent) != b.ids(agent) {
		t.Fatal("the honest peer did not get the events")
	}
}

func TestABlobCrossesBetweenTwoRealHosts(t *testing.T) {
	server, client := newHost(t), newHost(t)
	blob, h := randomBlob(5*BlobChunk + 7)
	HandleBlob(server, memBlobs{h: blob}, slog.New(slog.DiscardHandler))
	connect(t, client, server)
	partial := filepath.Join(t.TempDir(), "p")
	n, err := Fetch(context.Background(), client, server.ID(), memAgent, h, partial, nil)
	if err != nil || n != int64(len(blob)) {
		t.Fatalf("fetch: %d %v", n, err)
	}
	if got, _ := os.ReadFile(partial); !bytes.Equal(got, blob) {
		t.Fatal("content differs")
	}
}
