package protocol

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// pushBytes is what a pusher writes: the header, size bytes of data (all
// of it unless cut), and the end naming sum (none if cut).
func pushBytes(t *testing.T, agent string, size int64, data []byte, sum string, cut bool) *bytes.Buffer {
	t.Helper()
	var b bytes.Buffer
	head, _ := json.Marshal(PushHeader{Agent: agent, Size: size})
	WriteFrame(&b, head)
	if err := sendChunks(&b, bytes.NewReader(data), make([]byte, binary.MaxVarintLen64+BlobChunk)); err != nil {
		t.Fatal(err)
	}
	if !cut {
		end, _ := json.Marshal(pushEnd{sum})
		WriteFrame(&b, end)
	}
	return &b
}

// A peer keeps a pushed blob only when every announced byte came and they
// hash to what the pusher names at the end; otherwise the file the bytes
// went to is gone, and the pusher is told why.
func TestAPushIsKeptOnlyWhenItsBytesHashToWhatThePusherSays(t *testing.T) {
	data := bytes.Repeat([]byte("tern"), 3<<18) // 3 MiB: several chunks
	sum := sha256.Sum256(data)
	right := hex.EncodeToString(sum[:])
	for _, tc := range []struct {
		name    string
		size    int64
		data    []byte
		sum     string
		cut     bool
		kept    bool
		refusal error // what ServePush fails with, if it does
	}{
		{"whole and right", int64(len(data)), data, right, false, true, nil},
		{"other bytes than named", int64(len(data)), data, strings.Repeat("00", 32), false, false, ErrBlobHash},
		{"cut before its end", int64(len(data)), data[:len(data)/2], "", true, false, io.EOF},
		{"more bytes than announced", int64(len(data)) - 1, data, right, false, false, ErrProtocol},
		{"no bytes announced", 0, nil, right, false, false, ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var file, finished string
			finishes := 0
			take := func(hd PushHeader) (*os.File, func(string) error, error) {
				if hd.Agent != "agent" || hd.Size != tc.size {
					t.Fatalf("take got %+v", hd)
				}
				f, err := os.CreateTemp(dir, "push-*")
				if err != nil {
					t.Fatal(err)
				}
				file = f.Name()
				return f, func(h string) error { finishes++; finished = h; return nil }, nil
			}
			var answer bytes.Buffer
			err := ServePush(struct {
				io.Reader
				io.Writer
			}{pushBytes(t, "agent", tc.size, tc.data, tc.sum, tc.cut), &answer}, take)
			if tc.refusal == nil && err != nil || tc.refusal != nil && !errors.Is(err, tc.refusal) {
				t.Fatalf("ServePush: %v, want %v", err, tc.refusal)
			}
			if file == "" {
				if tc.kept {
					t.Fatal("take was not asked")
				}
				return // refused on its header
			}
			if finishes != 1 {
				t.Fatalf("finish called %d times", finishes)
			}
			got, readErr := os.ReadFile(file)
			if tc.kept {
				if finished != right || !bytes.Equal(got, data) {
					t.Fatalf("finished with %q, the file holds %d bytes (%v)", finished, len(got), readErr)
				}
			} else if finished != "" || !errors.Is(readErr, os.ErrNotExist) {
				t.Fatalf("finished with %q, the file: %v; want it removed", finished, readErr)
			}
			if tc.refusal != nil && !errors.Is(tc.refusal, ErrBlobHash) {
				return // cut, or broken: the stream is reset, not answered
			}
			var a pushAnswer
			if frame, err := ReadFrame(bufio.NewReader(&answer), maxPushFrame); err != nil || json.Unmarshal(frame, &a) != nil || a.Kept != tc.kept {
				t.Fatalf("answer %+v (%v), want kept %v", a, err, tc.kept)
			}
		})
	}
}
