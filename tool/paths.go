package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
)

// openWorkspace opens the workspace folder as an os.Root, through which
// alone the file tools touch it. Failing to is a Go error: the tool cannot
// run at all.
func openWorkspace(dir string) (*os.Root, error) {
	if dir == "" {
		return nil, errors.New("tool: no workspace folder")
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("tool: open the workspace: %w", err)
	}
	return root, nil
}

// cleanPath checks a path the model gave, before any file is touched: it
// must be relative and stay inside the workspace by its letters (a ".."
// that climbs out is refused here). It returns the path cleaned and
// slash-separated ("." for the workspace itself), or what is wrong. Where
// symbolic links lead is the os.Root's to check, as it opens the path.
func cleanPath(p string) (string, string) {
	if p == "" {
		return "", `path is empty: give a path relative to the workspace ("." is the workspace itself)`
	}
	slashed := filepath.ToSlash(p)
	if path.IsAbs(slashed) || filepath.IsAbs(p) || filepath.VolumeName(p) != "" {
		return "", fmt.Sprintf("path %s is absolute: give a path relative to the workspace", p)
	}
	c := path.Clean(slashed)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Sprintf("path %s leaves the workspace", p)
	}
	return c, ""
}

// escapes reports whether err is os.Root's refusal of a path that leads
// outside the root (through "..", or through a symbolic link that points
// outside or is absolute). The os package keeps that error unexported
// (errPathEscapes), so it is recognised by its text.
func escapes(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// describe turns an error from the workspace's os.Root about path p into
// a message for the model, without the workspace's own location.
func describe(err error, p string) string {
	var pe *fs.PathError
	inner := err
	if errors.As(err, &pe) {
		inner = pe.Err
	}
	switch {
	case escapes(err):
		return fmt.Sprintf("path %s leaves the workspace: a symbolic link on it points outside the workspace (or is absolute)", p)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("path %s does not exist", p)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Sprintf("path %s goes through a file as if it were a folder", p)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Sprintf("path %s: permission denied", p)
	}
	return fmt.Sprintf("path %s: %v", p, inner)
}
