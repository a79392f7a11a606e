package filecopytest

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Folder returns an empty folder on a filesystem of kind: "xfs" or
// "btrfs" (Mount), "ext4" (the test's temporary folder, when it is on
// ext4) or "tmpfs" (under /dev/shm, removed in cleanup). It skips the
// test, saying why, where there is none.
func Folder(t testing.TB, kind string) string {
	t.Helper()
	switch kind {
	case "xfs", "btrfs":
		return Mount(t, kind)
	case "ext4":
		dir := t.TempDir()
		if !is(t, dir, unix.EXT4_SUPER_MAGIC) {
			t.Skipf("the test's temporary folder %s is not on ext4", dir)
		}
		return dir
	case "tmpfs":
		dir, err := os.MkdirTemp("/dev/shm", "tern-test-")
		if err != nil {
			t.Skipf("no tmpfs folder: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if !is(t, dir, unix.TMPFS_MAGIC) {
			t.Skipf("/dev/shm is not tmpfs here")
		}
		return dir
	}
	t.Fatalf("filecopytest: no filesystem %q (xfs, btrfs, ext4 or tmpfs)", kind)
	return ""
}

// is reports whether dir's filesystem has the magic number magic.
func is(t testing.TB, dir string, magic int64) bool {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	return st.Type == magic
}
