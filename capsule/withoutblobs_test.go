package capsule

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tern-dev/tern/memory"
)

// workspaceMemoryCapsule is fullCapsule with agent.json's memory taking
// the workspace's text files, and a note: its index depends on blobs.
func workspaceMemoryCapsule(t testing.TB, s *testSigner) string {
	t.Helper()
	ctx := context.Background()
	dir := emptyCapsule(t, s, "helper")
	d, err := OpenDir(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	agent := DefaultAgent("helper")
	agent.Memory = &MemorySettings{Workspace: true}
	data, _ := agent.Encode()
	if err := os.WriteFile(filepath.Join(dir, AgentFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.AcceptEdits(ctx, s); err != nil {
		t.Fatal(err)
	}
	note, err := memory.AddDraftAs("note_00000000000000a1", "Deploys go through staging first.", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Append(ctx, s, 0, userMessage(t, "hello"), note); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	writeTree(t, ws, map[string]string{"NOTES.txt": "The staging host is called yew.\n", "sub/b.bin": "\x00\x01\x02beta"})
	if _, err := d.Snapshot(ctx, s, ws); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestACapsulePackedWithoutBlobsWantsThemAndBecomesTheWholeOneAsTheyArrive(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func(testing.TB, *testSigner) string
	}{
		{"a snapshot and a conversation", fullCapsule},
		{"memory indexing the workspace", workspaceMemoryCapsule},
	} {
		for _, upTo := range []int64{-1, 16} { // no blob kept; the smallest kept
			t.Run(fmt.Sprintf("%s, blobs up to %d bytes", tc.name, upTo), func(t *testing.T) {
				src := tc.make(t, newSigner(t))
				root := t.TempDir()
				whole := packTo(t, src, filepath.Join(root, "whole.tar"), PackOptions{})
				var skeleton bytes.Buffer
				if err := Pack(mustOpen(t, src), &skeleton, PackOptions{BlobsUpTo: upTo}); err != nil {
					t.Fatal(err)
				}
				if skeleton.Len() >= len(whole) {
					t.Errorf("the tar without blobs has %d bytes, the whole one %d", skeleton.Len(), len(whole))
				}
				dst := filepath.Join(root, "copy")
				if err := UnpackFrom(&skeleton, dst, Limits{}); err != nil {
					t.Fatalf("the tar without blobs is not a capsule that verifies: %v", err)
				}
				held := mustOpen(t, src).Manifest().Files
				var blobs []string
				for name := range held {
					if h := blobName(name); h != "" {
						blobs = append(blobs, h)
					}
				}
				slices.Sort(blobs)
				d, err := OpenDir(context.Background(), dst, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer d.Close()
				// The snapshot's files are wanted once its listing arrives.
				for range 3 {
					want, err := d.Wanted()
					if err != nil {
						t.Fatal(err)
					}
					for _, h := range want {
						data, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(BlobPath(h))))
						if err != nil {
							t.Fatal(err)
						}
						part := filepath.Join(root, "partial-"+h)
						if err := os.WriteFile(part, data, 0o600); err != nil {
							t.Fatal(err)
						}
						if err := d.AdoptBlob(h, part); err != nil {
							t.Fatal(err)
						}
					}
				}
				if want, _ := d.Wanted(); len(want) > 0 {
					t.Fatalf("still wanted after adopting every blob: %v", want)
				}
				d.Close()
				mustVerify(t, dst)
				again := packTo(t, dst, filepath.Join(root, "again.tar"), PackOptions{})
				if !bytes.Equal(again, whole) {
					t.Fatal("the copy, once its blobs arrived, packs to other bytes than the capsule it was copied from")
				}
			})
		}
	}
}

func TestCopiesTakenWithoutBlobsMergeWithEachOtherAndWithTheWholeOne(t *testing.T) {
	src := workspaceMemoryCapsule(t, newSigner(t))
	root := t.TempDir()
	skeleton := func(name string) string {
		var buf bytes.Buffer
		if err := Pack(mustOpen(t, src), &buf, PackOptions{BlobsUpTo: -1}); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(root, name)
		if err := UnpackFrom(&buf, dir, Limits{}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	a, b := skeleton("a"), skeleton("b")
	if _, err := Merge(mustOpen(t, a), mustOpen(t, b), filepath.Join(root, "ab")); err != nil {
		t.Fatalf("two copies without blobs: %v", err)
	}
	mustVerify(t, filepath.Join(root, "ab"))
	if _, err := Merge(mustOpen(t, a), mustOpen(t, src), filepath.Join(root, "whole")); err != nil {
		t.Fatalf("a copy without blobs and the whole one: %v", err)
	}
	want := packTo(t, src, filepath.Join(root, "src.tar"), PackOptions{})
	if got := packTo(t, filepath.Join(root, "whole"), filepath.Join(root, "whole.tar"), PackOptions{}); !bytes.Equal(got, want) {
		t.Fatal("merged with the whole copy, a copy without blobs is not the whole capsule")
	}
}
