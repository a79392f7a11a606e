// Package filecopytest gives tests a real filesystem of a chosen kind, so
// that each of filecopy's methods runs where it exists.
package filecopytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// mkfs is the command that makes each kind of filesystem that can
// reflink, and its package on Debian.
var mkfs = map[string]struct {
	args []string
	pkg  string
}{
	"xfs":   {[]string{"mkfs.xfs", "-q", "-f", "-m", "reflink=1"}, "xfsprogs"},
	"btrfs": {[]string{"mkfs.btrfs", "-q", "-f"}, "btrfs-progs"},
}

// imageSize is the size of the (sparse) image: above mkfs.xfs's minimum
// of 300 MiB.
const imageSize = 512 << 20

// Mount makes a filesystem of kind ("xfs", with reflinks on, or "btrfs")
// in a sparse image under t.TempDir(), mounts it through a loop device
// and returns a folder on it. It skips the test, saying what is missing,
// unless it runs as root on Linux with the kind's mkfs, losetup and mount.
// t.Cleanup unmounts it and detaches the loop device, whether the test
// passed or not.
func Mount(t testing.TB, kind string) string {
	t.Helper()
	m, ok := mkfs[kind]
	if !ok {
		t.Fatalf("filecopytest: no filesystem %q (xfs or btrfs)", kind)
	}
	if runtime.GOOS != "linux" {
		t.Skipf("a loop-mounted %s is made only on Linux", kind)
	}
	if os.Geteuid() != 0 {
		t.Skipf("a loop-mounted %s needs root", kind)
	}
	for _, tool := range []string{m.args[0], "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("a loop-mounted %s needs %s (Debian: apt-get install %s util-linux mount)", kind, tool, m.pkg)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, kind+".img")
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	err = f.Truncate(imageSize)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	run(t, append(m.args, img)...)
	dev := run(t, "losetup", "--find", "--show", img)
	t.Cleanup(func() { run(t, "losetup", "--detach", dev) })
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", "-t", kind, dev, mnt)
	t.Cleanup(func() { run(t, "umount", mnt) }) // runs before the detach
	return mnt
}

// run runs a command and returns its output, trimmed; a failure fails
// the test with the command and what it printed.
func run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}
