//go:build !linux

package filecopytest

import "testing"

// Folder skips the test: the filesystems it names are Linux's.
func Folder(t testing.TB, kind string) string {
	t.Helper()
	t.Skipf("a folder on %s is made only on Linux", kind)
	return ""
}
