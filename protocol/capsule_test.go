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
)

type memCapsules map[string][]byte

func (m memCapsules) Shared(string) ([]string, error) {
	var ids []string
	for id := range m {
		ids = append(ids, id)
	}
	return ids, nil
}

func (m memCapsules) Export(agent, _ string, w io.Writer) error {
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
		ids, err := ListCapsules(conn)
		if err != nil || len(ids) != 1 || ids[0] != agent {
			t.Fatalf("list: %v %v", ids, err)
		}
	})
	serveOnce(t, c, func(conn net.Conn) {
		var got bytes.Buffer
		n, err := FetchCapsule(conn, agent, &got, 1<<30)
		if err != nil || n != int64(len(tarBytes)) || !bytes.Equal(got.Bytes(), tarBytes) {
			t.Fatalf("get: %d %v", n, err)
		}
	})
	serveOnce(t, c, func(conn net.Conn) {
		_, err := FetchCapsule(conn, "someone-else", io.Discard, 1<<30)
		if !errors.Is(err, ErrNoCapsule) {
			t.Fatalf("get of an unshared capsule: %v", err)
		}
	})
	serveOnce(t, c, func(conn net.Conn) {
		_, err := FetchCapsule(conn, agent, io.Discard, 1000)
		if err == nil || !strings.Contains(err.Error(), "over the limit") {
			t.Fatalf("get over the limit: %v", err)
		}
	})
}
