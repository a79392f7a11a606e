package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tern-dev/tern/internal/filelock"
)

// A write that fails leaves the file as it was and no temporary file; one
// that succeeds replaces it whole with the permissions asked.
func TestAFailedWriteLeavesTheOldContent(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f.json")
	if err := WriteFile(p, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := Write(p, 0o644, func(w io.Writer) error {
		w.Write([]byte("half of the new"))
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err %v", err)
	}
	if got, _ := os.ReadFile(p); string(got) != "old" {
		t.Fatalf("after a failed write: %q", got)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("%d entries: a temporary file was left", len(entries))
	}
	if err := WriteFile(p, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(p)
	if got, _ := os.ReadFile(p); string(got) != "new" || st.Mode().Perm() != 0o644 {
		t.Fatalf("%q %v", got, st.Mode())
	}
}

// What a killed writer left beside a target is removed by the next one;
// what a live writer holds is not.
func TestLeftoversOfKilledWritersAreRemovedAndLiveOnesKept(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out.tar")
	dead, _ := os.CreateTemp(dir, TempPattern(target))
	dead.Close()
	live, _ := os.CreateTemp(dir, TempPattern(target))
	live.Close()
	lock, err := filelock.TryLock(live.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if !IsTemp(dead.Name()) || IsTemp(target) {
		t.Fatal("IsTemp does not tell the temporary files")
	}
	RemoveLeftovers(target)
	if _, err := os.Stat(dead.Name()); !os.IsNotExist(err) {
		t.Fatal("a killed writer's file stays")
	}
	if _, err := os.Stat(live.Name()); err != nil {
		t.Fatal("a live writer's file was removed")
	}
}

// Files written without an fsync each are synced together; a file that is
// not there is an error that names it, whether they are few (an fsync
// each) or many (one sync of their filesystem, then nothing to name).
func TestSyncFilesSyncsFewOneByOneAndManyTogether(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range syncfsAt + 1 {
		p := filepath.Join(dir, fmt.Sprint("f", i))
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	if err := SyncFiles(dir, paths[:2]); err != nil {
		t.Fatal(err)
	}
	if err := SyncFiles(dir, paths); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	if err := SyncFiles(dir, []string{paths[0], missing}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("SyncFiles of a missing file: %v", err)
	}
	if err := SyncFiles(filepath.Join(dir, "no-such-folder"), paths); runtime.GOOS == "linux" && err == nil { // the folder's filesystem is synced
		t.Fatal("SyncFiles on a folder that does not exist succeeded")
	}
}
