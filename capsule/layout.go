package capsule

import (
	"fmt"
	"path"
	"strings"
)

// Format is the manifest's format string for capsule v1.
const Format = "tern.capsule/1"

// The files of capsule v1, relative to the capsule root, with "/" separators.
const (
	ManifestFile    = "manifest.json"
	AgentFile       = "agent.json"
	NotesFile       = "memory/working_memory.md"
	JournalFile     = "memory/timeline_events.jsonl"
	IndexFile       = "memory/vector_index/index.json"
	SnapshotFile    = "artifacts/snapshot.json"
	EnvironmentFile = "environment/spec.json"
	BlobDir         = "artifacts/blobs"
)

// Layout lists the fixed files every capsule has besides the manifest and
// its blobs, in sorted order.
var Layout = []string{AgentFile, SnapshotFile, EnvironmentFile, NotesFile, JournalFile, IndexFile}

// dirs are the folders of the layout, parents first.
var dirs = []string{"artifacts", BlobDir, "environment", "memory", "memory/vector_index"}

// BlobPath is the capsule-relative path of the blob with the given sha256 hex.
func BlobPath(hexSum string) string { return BlobDir + "/" + hexSum }

// isLayoutFile reports whether name is one of the fixed files of Layout.
func isLayoutFile(name string) bool {
	for _, f := range Layout {
		if f == name {
			return true
		}
	}
	return false
}

// blobName returns the sha256 hex of a blob path, or "" if name is not one.
func blobName(name string) string {
	dir, file := path.Split(name)
	if dir != BlobDir+"/" || !isSHA256Hex(file) {
		return ""
	}
	return file
}

// checkName validates a capsule-relative file name: relative, "/"-separated,
// clean, and one the format knows (a layout file or a blob).
func checkName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("empty path")
	case strings.HasPrefix(name, "/"):
		return fmt.Errorf("absolute path %q", name)
	case strings.Contains(name, "\\"):
		return fmt.Errorf("path %q uses a backslash; capsule paths use /", name)
	case path.Clean(name) != name:
		return fmt.Errorf("path %q is not clean (no ., .., // or trailing /)", name)
	case name == ".." || strings.HasPrefix(name, "../"):
		return fmt.Errorf("path %q escapes the capsule", name)
	}
	if isLayoutFile(name) || blobName(name) != "" {
		return nil
	}
	return fmt.Errorf("path %q is not part of capsule v1 (expected one of %s, or %s/<sha256 hex>)", name, strings.Join(Layout, ", "), BlobDir)
}

func isSHA256Hex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
