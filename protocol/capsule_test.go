package protocol

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/tern-dev/tern/journal"
)

type memCapsules map[string][]byte

func (m memCapsules) Shared(string) ([]string, error) {
	var ids []string
	for id := range m {
		ids = append(ids, id)
	}
	return ids, nil
}

func (m memCapsules) Vector(agent string) (journal.Vector, error) {
	if _, ok := m[agent]; !ok {
		return nil, ErrNoCapsule
	}
	return journal.Vector{"12D3KooWmachine": {Seq: uint64(len(m[agent]))}}, nil
}

func (m memCapsules) Export(agent, _ string, _ bool, w io.Writer) error {
	b, ok := m[agent]
	if !ok {
		return fmt.Errorf("%s: %w", agent, ErrNoCapsule)
	}
	_, err := w.Write(b)
	return err
}

func serveOnce(t *testing.T, c Capsules, client func(net.Conn)) {
	t.Helper()
	cc, sc := net.Pipe()
	var wg sync.WaitGroup
	wg.Go(func() { ServeCapsules(sc, c, "peer"); sc.Close() })
	client(cc)
	cc.Close()
	wg.Wait()
}

func TestAPeerListsAndHandsOverTheCapsulesItShares(t *testing.T) {
	tarBytes := bytes.Repeat([]byte("tar!"), BlobChunk) // four frames' worth
	c := memCapsules{agent: tarBytes}
	serveOnce(t, c, func(conn net.Conn) {
		ids, vectors, err := ListCapsules(conn)
		want, _ := c.Vector(agent)
		if err != nil || len(ids) != 1 || ids[0] != agent || vectors[agent] != VectorDigest(want) || len(vectors[agent]) != 32 {
			t.Fatalf("list: %v %v %v", ids, vectors, err)
		}
	})
	serveOnce(t, c, func(conn net.Conn) {
		var got bytes.Buffer
		n, err := FetchCapsule(conn, agent, true, &got, 1<<30)
		if err != nil || n != int64(len(tarBytes)) || !bytes.Equal(got.Bytes(), tarBytes) {
			t.Fatalf("get: %d %v", n, err)
		}
	})
	serveOnce(t, c, func(conn net.Conn) {
		_, err := FetchCapsule(conn, "someone-else", true, io.Discard, 1<<30)
		if !errors.Is(err, ErrNoCapsule) {
			t.Fatalf("get of an unshared capsule: %v", err)
		}
	})
	serveOnce(t, c, func(conn net.Conn) {
		_, err := FetchCapsule(conn, agent, true, io.Discard, 1000)
		if err == nil || !strings.Contains(err.Error(), "over the limit") {
			t.Fatalf("get over the limit: %v", err)
		}
	})
}

// Two journals' digests are equal exactly when their vectors are.
func TestAVectorDigestNamesTheVector(t *testing.T) {
	a := journal.Vector{"m1": {Seq: 3, ID: "e3"}, "m2": {Seq: 1, ID: "f1"}}
	b := journal.Vector{"m2": {Seq: 1, ID: "f1"}, "m1": {Seq: 3, ID: "e3"}}
	if VectorDigest(a) != VectorDigest(b) {
		t.Fatal("the same vector built in another order has another digest")
	}
	for _, other := range []journal.Vector{
		{"m1": {Seq: 4, ID: "e4"}, "m2": {Seq: 1, ID: "f1"}},
		{"m1": {Seq: 3, ID: "e3x"}, "m2": {Seq: 1, ID: "f1"}},
		{"m1": {Seq: 3, ID: "e3"}},
		{"m1": {Seq: 3, ID: "e3", Aside: "m1"}, "m2": {Seq: 1, ID: "f1"}},
	} {
		if VectorDigest(other) == VectorDigest(a) {
			t.Fatalf("%v and %v share a digest", other, a)
		}
	}
}
