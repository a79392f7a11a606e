package protocol

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// fetchMany runs one fetch of many against src and returns what it got to
// and each blob's outcome.
func fetchMany(t *testing.T, src BlobSource, hashes []string, dir string, server func(net.Conn) net.Conn) (int, map[string]error, error) {
	t.Helper()
	cc, sc := net.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() {
		ServeBlob(server(sc), src, memPeer)
		sc.Close()
	})
	outcomes := map[string]error{}
	n, err := FetchBlobs(cc, memAgent, hashes, func(h string) string { return filepath.Join(dir, h) }, nil,
		func(h string, got int64, err error) { outcomes[h] = err })
	cc.Close()
	wg.Wait()
	return n, outcomes, err
}

// Many blobs on one stream: each arrives whole and checked, one the peer
// does not hold is said so and the others go on, and one a cut fetch had
// begun resumes from its partial file.
func TestManyBlobsArriveOnOneStream(t *testing.T) {
	src := memBlobs{}
	var hashes []string
	for _, size := range []int{10, 20_000, 0, BlobChunk + 5, 3} {
		b, h := randomBlob(size)
		src[h] = b
		hashes = append(hashes, h)
	}
	_, missing := randomBlob(77)
	hashes = append(hashes[:2], append([]string{missing}, hashes[2:]...)...)
	dir := t.TempDir()
	begun := hashes[4] // BlobChunk+5 bytes: 1,000 of them are here already
	os.WriteFile(filepath.Join(dir, begun), src[begun][:1000], 0o600)

	n, outcomes, err := fetchMany(t, src, hashes, dir, same)
	if err != nil || n != len(hashes) {
		t.Fatalf("got to %d of %d: %v", n, len(hashes), err)
	}
	for _, h := range hashes {
		if h == missing {
			if !errors.Is(outcomes[h], ErrNoBlob) {
				t.Errorf("the missing blob: %v, want ErrNoBlob", outcomes[h])
			}
			continue
		}
		if outcomes[h] != nil {
			t.Errorf("blob of %d bytes: %v", len(src[h]), outcomes[h])
		}
		if got, _ := os.ReadFile(filepath.Join(dir, h)); !bytes.Equal(got, src[h]) {
			t.Errorf("blob of %d bytes arrived as %d other bytes", len(src[h]), len(got))
		}
	}
}

// A blob whose bytes are not what its name says is refused and its
// partial file removed; the blobs after it still arrive.
func TestABadBlobAmongManyIsRefusedAndTheRestArrive(t *testing.T) {
	a, ha := randomBlob(5000)
	b, hb := randomBlob(6000)
	src := memBlobs{ha: bytes.Repeat([]byte{1}, len(a)), hb: b} // a's bytes are not a's
	dir := t.TempDir()
	n, outcomes, err := fetchMany(t, src, []string{ha, hb}, dir, same)
	if err != nil || n != 2 {
		t.Fatalf("got to %d: %v", n, err)
	}
	if !errors.Is(outcomes[ha], ErrBlobHash) {
		t.Errorf("the lying blob: %v, want ErrBlobHash", outcomes[ha])
	}
	if _, err := os.Stat(filepath.Join(dir, ha)); err == nil {
		t.Error("the lying blob's partial file was kept")
	}
	if outcomes[hb] != nil {
		t.Errorf("the blob after it: %v", outcomes[hb])
	}
}

// A peer sends about batchBytes a request and ends the stream: the asker
// learns how many it got to, and those all arrived.
func TestAFetchOfManyEndsAfterItsShareOfBytes(t *testing.T) {
	src := memBlobs{}
	var hashes []string
	for i := range 5 {
		b, h := randomBlob(batchBytes/4 + i)
		src[h] = b
		hashes = append(hashes, h)
	}
	n, outcomes, err := fetchMany(t, src, hashes, t.TempDir(), same)
	if err != nil || n != 4 {
		t.Fatalf("got to %d of 5 (%v), want 4: the fifth is past the share", n, err)
	}
	for _, h := range hashes[:4] {
		if outcomes[h] != nil {
			t.Errorf("%v", outcomes[h])
		}
	}
}

// A peer that serves one blob a request (an older tern) answers a fetch
// of many as a have query: the asker is told to fetch one by one.
func TestAnOlderPeerIsFetchedFromOneByOne(t *testing.T) {
	_, h := randomBlob(10)
	cc, sc := net.Pipe()
	go func() {
		r := bufio.NewReader(sc)
		ReadFrame(r, maxBlobRequest)
		WriteFrame(sc, []byte(`{"size":0,"have":[]}`)) // what an older ServeBlob answers
		sc.Close()
	}()
	n, err := FetchBlobs(cc, memAgent, []string{h}, func(string) string { return filepath.Join(t.TempDir(), "p") }, nil, func(string, int64, error) {})
	cc.Close()
	if n != 0 || !errors.Is(err, ErrNoBatches) {
		t.Fatalf("got to %d, %v; want ErrNoBatches", n, err)
	}
}
