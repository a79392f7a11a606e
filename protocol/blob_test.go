package protocol

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// memBlobs serves blobs from memory.
type memBlobs map[string][]byte

type nopSeekCloser struct{ *bytes.Reader }

func (nopSeekCloser) Close() error { return nil }

// memAgent is the one agent memBlobs serves; memPeer is who asks.
const (
	memAgent = "agent"
	memPeer  = "peer"
)

func (m memBlobs) OpenBlob(agent, peer, h string) (io.ReadSeekCloser, int64, error) {
	b, ok := m[h]
	if agent != memAgent {
		ok = false
	}
	if !ok {
		return nil, 0, fmt.Errorf("blob %s: %w", h, ErrNoBlob)
	}
	return nopSeekCloser{bytes.NewReader(b)}, int64(len(b)), nil
}

func (m memBlobs) HeldBlobs(agent, peer string, hashes []string) []string {
	var held []string
	for _, h := range hashes {
		if _, ok := m[h]; ok && agent == memAgent {
			held = append(held, h)
		}
	}
	return held
}

func randomBlob(n int) ([]byte, string) {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(uint64(n), 9))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	s := sha256.Sum256(b)
	return b, hex.EncodeToString(s[:])
}

// cutAfter is a connection that fails once n bytes have been read from it.
type cutAfter struct {
	net.Conn
	n int
}

func (c *cutAfter) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > c.n {
		p = p[:c.n]
	}
	k, err := c.Conn.Read(p)
	c.n -= k
	return k, err
}

// corrupting flips one byte of the server's output at a given offset.
type corrupting struct {
	net.Conn
	at, seen int
}

func (c *corrupting) Write(p []byte) (int, error) {
	if c.at >= c.seen && c.at < c.seen+len(p) {
		p = bytes.Clone(p)
		p[c.at-c.seen] ^= 0xff
	}
	c.seen += len(p)
	return c.Conn.Write(p)
}

// fetch runs one transfer; wrap lets a test break the client's or server's side.
func fetch(t *testing.T, src BlobSource, h, partial string, client func(net.Conn) net.Conn, server func(net.Conn) net.Conn) (int64, error) {
	t.Helper()
	cc, sc := net.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() {
		ServeBlob(server(sc), src, memPeer)
		sc.Close()
	})
	n, err := FetchBlob(client(cc), memAgent, h, partial, nil)
	cc.Close()
	wg.Wait()
	return n, err
}

func same(c net.Conn) net.Conn { return c }

func TestABlobArrivesWholeAndChecked(t *testing.T) {
	blob, h := randomBlob(3*BlobChunk + 1234)
	partial := filepath.Join(t.TempDir(), "p")
	n, err := fetch(t, memBlobs{h: blob}, h, partial, same, same)
	if err != nil || n != int64(len(blob)) {
		t.Fatalf("fetch: %d %v", n, err)
	}
	if got, _ := os.ReadFile(partial); !bytes.Equal(got, blob) {
		t.Fatal("content differs")
	}
}

func TestATransferCutInTheMiddleResumesWithoutStartingOver(t *testing.T) {
	blob, h := randomBlob(8 * BlobChunk)
	partial := filepath.Join(t.TempDir(), "p")
	first, err := fetch(t, memBlobs{h: blob}, h, partial, func(c net.Conn) net.Conn { return &cutAfter{Conn: c, n: 5*BlobChunk + 100} }, same)
	if err == nil {
		t.Fatal("a cut link went unnoticed")
	}
	if first < 4*BlobChunk {
		t.Fatalf("only %d bytes kept before the cut", first)
	}
	second, err := fetch(t, memBlobs{h: blob}, h, partial, same, same)
	if err != nil {
		t.Fatal(err)
	}
	if first+second != int64(len(blob)) {
		t.Fatalf("resumed transfer moved %d + %d bytes for a %d-byte blob: it started over", first, second, len(blob))
	}
	if got, _ := os.ReadFile(partial); !bytes.Equal(got, blob) {
		t.Fatal("content differs after resume")
	}
}

func TestACorruptChunkIsRejectedAndFetchedAgain(t *testing.T) {
	blob, h := randomBlob(6 * BlobChunk)
	partial := filepath.Join(t.TempDir(), "p")
	// Corrupt a byte inside the third chunk as the server sends it. (Over
	// libp2p the transport's authentication would catch it; a peer that
	// reads a rotten copy from its disk sends bytes like these.)
	at := 2*(3+BlobChunk) + 200 // past a small header and two frames (3-byte varint each)
	_, err := fetch(t, memBlobs{h: blob}, h, partial, same, func(c net.Conn) net.Conn { return &corrupting{Conn: c, at: at} })
	if !errors.Is(err, ErrBlobHash) {
		t.Fatalf("corrupt chunk: %v", err)
	}
	if _, err := os.Stat(partial); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the partial file that held the corrupt chunk is still there (%v): a resume would keep it", err)
	}
	if n, err := fetch(t, memBlobs{h: blob}, h, partial, same, same); err != nil || n != int64(len(blob)) {
		t.Fatalf("fetched again: %d bytes, %v", n, err)
	}
	if got, _ := os.ReadFile(partial); !bytes.Equal(got, blob) {
		t.Fatal("content differs after refetch")
	}
}

func TestAPeerThatSendsOtherBytesIsCaughtAtTheEnd(t *testing.T) {
	blob, h := randomBlob(2 * BlobChunk)
	other, _ := randomBlob(2*BlobChunk + 1)
	partial := filepath.Join(t.TempDir(), "p")
	_, err := fetch(t, memBlobs{h: other[:len(blob)]}, h, partial, same, same)
	if !errors.Is(err, ErrBlobHash) {
		t.Fatalf("lying peer: %v", err)
	}
	if _, err := os.Stat(partial); err == nil {
		t.Fatal("the bad partial file was kept")
	}
	_ = blob
}

func TestAMissingBlobIsReported(t *testing.T) {
	_, h := randomBlob(10)
	if _, err := fetch(t, memBlobs{}, h, filepath.Join(t.TempDir(), "p"), same, same); !errors.Is(err, ErrNoBlob) {
		t.Fatalf("missing blob: %v", err)
	}
}

func TestAHaveQueryAnswersWhichBlobsTheAgentsCapsuleHolds(t *testing.T) {
	a, ha := randomBlob(10)
	_, hb := randomBlob(11)
	ask := func(agent string, hashes []string) ([]string, error) {
		cc, sc := net.Pipe()
		defer cc.Close()
		go func() { ServeBlob(sc, memBlobs{ha: a}, memPeer); sc.Close() }()
		return AskHave(cc, agent, hashes)
	}
	if got, err := ask(memAgent, []string{ha, hb}); err != nil || len(got) != 1 || got[0] != ha {
		t.Fatalf("have %v: %v, want only %s", got, err, ha)
	}
	if got, err := ask("another-agent", []string{ha}); err != nil || len(got) != 0 {
		t.Fatalf("a blob of another agent's capsule was offered: %v %v", got, err)
	}
	if _, err := ask(memAgent, []string{"not-a-hash"}); err == nil {
		t.Fatal("a malformed have query was answered")
	}
	if _, err := AskHave(nil, memAgent, make([]string, MaxHaveQuery+1)); err == nil {
		t.Fatal("an oversized have query was sent")
	}
}

func TestAProgressFunctionFollowsEveryChunk(t *testing.T) {
	blob, h := randomBlob(3*BlobChunk + 5)
	partial := filepath.Join(t.TempDir(), "p")
	cc, sc := net.Pipe()
	go func() { ServeBlob(sc, memBlobs{h: blob}, memPeer); sc.Close() }()
	var seen []int64
	_, err := FetchBlob(cc, memAgent, h, partial, func(done, size int64) {
		if size != int64(len(blob)) {
			t.Errorf("size %d, want %d", size, len(blob))
		}
		seen = append(seen, done)
	})
	cc.Close()
	want := []int64{BlobChunk, 2 * BlobChunk, 3 * BlobChunk, int64(len(blob))}
	if err != nil || fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("progress %v (%v), want %v", seen, err, want)
	}
}

// lyingServer answers one fetch with header, then writes frames.
func lyingServer(t *testing.T, c net.Conn, header string, frames ...[]byte) {
	t.Helper()
	r := bufio.NewReader(c)
	if _, err := ReadFrame(r, maxBlobRequest); err != nil {
		t.Error(err)
		return
	}
	WriteFrame(c, []byte(header))
	for _, f := range frames {
		WriteFrame(c, f)
	}
	c.Close()
}

func TestAPeerThatBreaksTheProtocolLeavesNothingToResumeFrom(t *testing.T) {
	_, h := randomBlob(10)
	for _, c := range []struct {
		name   string
		header string
		frames [][]byte
	}{
		{"more bytes than announced", `{"size":10}`, [][]byte{bytes.Repeat([]byte("x"), 8), bytes.Repeat([]byte("y"), 8)}},
		{"an empty chunk", `{"size":10}`, [][]byte{bytes.Repeat([]byte("x"), 4), {}}},
		{"a size over the limit", fmt.Sprintf(`{"size":%d}`, int64(MaxBlobSize)+1), nil},
		{"a negative size", `{"size":-5}`, nil},
	} {
		partial := filepath.Join(t.TempDir(), "p")
		cc, sc := net.Pipe()
		go lyingServer(t, sc, c.header, c.frames...)
		_, err := FetchBlob(cc, memAgent, h, partial, nil)
		cc.Close()
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: %v, want ErrProtocol", c.name, err)
		}
		if st, err := os.Stat(partial); err == nil && st.Size() > 0 {
			t.Errorf("%s: %d bytes kept to resume from", c.name, st.Size())
		}
	}
}
