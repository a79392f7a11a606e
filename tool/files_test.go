package tool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tern-dev/tern/session"
)

func TestReadFile(t *testing.T) {
	ws, _ := workspace(t, map[string]string{"notes/a.txt": "hello, wörld\n"})
	res := call(t, "read_file", ws, map[string]any{"path": "notes/a.txt"}, "")
	wantOK(t, res)
	if res.Output != "hello, wörld\n" || res.Cut {
		t.Fatalf("got %+v", res)
	}
	// offset and limit are in bytes; a limit that stops short says where to read on.
	res = call(t, "read_file", ws, map[string]any{"path": "./notes/../notes/a.txt", "offset": 7, "limit": 3}, "")
	wantOK(t, res)
	if want := "wö\n[read_file: bytes 7 to 10 of 14 shown; read on with offset 10]"; res.Output != want || res.Cut {
		t.Fatalf("got %+v, want %q (not cut: the caller's limit stopped it)", res, want)
	}
	res = call(t, "read_file", ws, map[string]any{"path": "notes/a.txt", "offset": 14}, "")
	if res.IsError || res.Output != "" {
		t.Fatalf("reading at the end: %+v", res)
	}
	wantError(t, call(t, "read_file", ws, map[string]any{"path": "notes/a.txt", "offset": 15}, ""), "offset 15 is past the end", "14 bytes")
	wantError(t, call(t, "read_file", ws, map[string]any{"path": "notes"}, ""), "notes is a folder", "list_files")
	wantError(t, call(t, "read_file", ws, map[string]any{"path": "nope.txt"}, ""), "path nope.txt does not exist")
	wantError(t, call(t, "read_file", ws, map[string]any{"path": "notes/a.txt/x"}, ""), "notes/a.txt/x")
	write(t, filepath.Join(ws, "bin"), "ab\x00cd")
	wantError(t, call(t, "read_file", ws, map[string]any{"path": "bin"}, ""), "bin is not a text file", "byte 2")
}

// A file longer than the cap is read whole in pieces, each ending with the
// offset of the next; a cut never splits a character.
func TestReadFileCap(t *testing.T) {
	content := "a" + strings.Repeat("é", 100_000) + "end" // 200,004 bytes; 65536 falls inside an é
	ws, _ := workspace(t, map[string]string{"big.txt": content})
	note := regexp.MustCompile(`\n\[read_file: bytes (\d+) to (\d+) of 200004 shown; read on with offset (\d+)\]$`)
	var got strings.Builder
	offset := 0
	for i := 0; ; i++ {
		res := call(t, "read_file", ws, map[string]any{"path": "big.txt", "offset": offset}, "")
		wantOK(t, res)
		m := note.FindStringSubmatch(res.Output)
		if m == nil {
			if res.Cut || i == 0 {
				t.Fatalf("piece %d: no note: %+v", i, res.Cut)
			}
			got.WriteString(res.Output)
			break
		}
		if !res.Cut {
			t.Fatalf("piece %d has a note but Cut is false", i)
		}
		text := strings.TrimSuffix(res.Output, m[0])
		if len(text) > OutputCap || len(text) < OutputCap-3 {
			t.Fatalf("piece %d holds %d bytes", i, len(text))
		}
		next, _ := strconv.Atoi(m[3])
		if m[1] != strconv.Itoa(offset) || m[2] != m[3] || next != offset+len(text) {
			t.Fatalf("piece %d at %d: note %q for %d bytes", i, offset, m[0], len(text))
		}
		got.WriteString(text)
		offset = next
	}
	if got.String() != content {
		t.Fatalf("the pieces do not make the file: %d bytes, want %d", got.Len(), len(content))
	}
}

// Confinement: whatever the path, no file tool reads, lists or writes
// outside the workspace, and the refusal is an error result saying why.
func TestConfinement(t *testing.T) {
	ws, parent := workspace(t, map[string]string{"sub/in.txt": "INSIDE"})
	secret := filepath.Join(parent, "outside", "secret.txt")
	symlink(t, secret, filepath.Join(ws, "abs-out"))                            // final component, absolute
	symlink(t, "../outside/secret.txt", filepath.Join(ws, "rel-out"))           // final component, relative
	symlink(t, filepath.Join(parent, "outside"), filepath.Join(ws, "dir-out"))  // a parent folder
	symlink(t, "../../outside", filepath.Join(ws, "sub", "deep-out"))           // a parent folder, further down
	symlink(t, "sub/../..", filepath.Join(ws, "sneaky"))                        // climbs out through a link's own ..
	symlink(t, filepath.Join(ws, "sub", "in.txt"), filepath.Join(ws, "abs-in")) // absolute, even pointing inside

	cases := []struct{ path, says string }{
		{"../outside/secret.txt", "path ../outside/secret.txt leaves the workspace"},
		{"sub/../../outside/secret.txt", "leaves the workspace"},
		{"..", "leaves the workspace"},
		{secret, "is absolute"},
		{filepath.Join(ws, "sub", "in.txt"), "is absolute"},
		{"abs-out", "path abs-out leaves the workspace: a symbolic link"},
		{"rel-out", "leaves the workspace"},
		{"dir-out/secret.txt", "path dir-out/secret.txt leaves the workspace"},
		{"sub/deep-out/secret.txt", "leaves the workspace"},
		{"sneaky/outside/secret.txt", "leaves the workspace"},
		{"abs-in", "leaves the workspace"},
	}
	for _, c := range cases {
		t.Run("read "+c.path, func(t *testing.T) {
			res := call(t, "read_file", ws, map[string]any{"path": c.path}, "")
			wantError(t, res, c.says)
			if strings.Contains(res.Output, "SECRET") {
				t.Fatal("read the secret")
			}
		})
		t.Run("write "+c.path, func(t *testing.T) {
			wantError(t, call(t, "write_file", ws, map[string]any{"path": c.path, "content": "PWNED"}, "op1"), c.says)
		})
	}
	for _, p := range []string{"..", "../outside", "dir-out", "sub/deep-out", "/"} {
		res := call(t, "list_files", ws, map[string]any{"path": p}, "")
		wantError(t, res)
		if strings.Contains(res.Output, "secret.txt") {
			t.Fatalf("list_files %s listed outside: %q", p, res.Output)
		}
	}
	// Writing below an outward link, in a folder that does not exist yet,
	// creates nothing outside either.
	wantError(t, call(t, "write_file", ws, map[string]any{"path": "dir-out/new/x.txt", "content": "PWNED"}, "op1"), "leaves the workspace")
	if data, _ := os.ReadFile(secret); string(data) != "SECRET" {
		t.Fatalf("the secret is now %q", data)
	}
	if entries, _ := os.ReadDir(filepath.Join(parent, "outside")); len(entries) != 1 {
		t.Fatalf("something was written outside: %v", entries)
	}
}

// Relative links that stay inside the workspace are followed.
func TestInwardLinks(t *testing.T) {
	ws, _ := workspace(t, map[string]string{"sub/in.txt": "INSIDE"})
	symlink(t, "sub/in.txt", filepath.Join(ws, "file-in"))
	symlink(t, "sub", filepath.Join(ws, "dir-in"))
	symlink(t, "../sub/in.txt", filepath.Join(ws, "sub", "up-and-back"))
	for _, p := range []string{"file-in", "dir-in/in.txt", "sub/up-and-back", "dir-in/up-and-back"} {
		res := call(t, "read_file", ws, map[string]any{"path": p}, "")
		if res.IsError || res.Output != "INSIDE" {
			t.Errorf("read %s: %+v", p, res)
		}
	}
	res := call(t, "write_file", ws, map[string]any{"path": "dir-in/new.txt", "content": "N"}, "op1")
	wantOK(t, res)
	if data, _ := os.ReadFile(filepath.Join(ws, "sub", "new.txt")); string(data) != "N" {
		t.Fatalf("write through an inward folder link: %q", data)
	}
	// The last component of a write is never a link: it would be replaced
	// by a file, not written through.
	wantError(t, call(t, "write_file", ws, map[string]any{"path": "file-in", "content": "N"}, "op1"), "path file-in is a symbolic link (to sub/in.txt)")
	res = call(t, "list_files", ws, map[string]any{"path": "dir-in"}, "")
	if res.IsError || res.Output != "in.txt  6\nnew.txt  1\nup-and-back -> ../sub/in.txt\n" {
		t.Fatalf("list through an inward link: %+v", res)
	}
}

func TestListFiles(t *testing.T) {
	ws, _ := workspace(t, map[string]string{
		"b.txt":         "bb",
		"a/x.go":        "package x",
		"a/deep/y.md":   "",
		"c d/space.txt": "s",
	})
	if err := os.Mkdir(filepath.Join(ws, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "../outside", filepath.Join(ws, "link"))

	res := call(t, "list_files", ws, map[string]any{}, "")
	if want := "a/\nb.txt  2\nc d/\nempty/\nlink -> ../outside\n"; res.IsError || res.Output != want {
		t.Fatalf("list: %q, want %q", res.Output, want)
	}
	res = call(t, "list_files", ws, map[string]any{"recursive": true}, "")
	if want := "a/\na/deep/\na/deep/y.md  0\na/x.go  9\nb.txt  2\nc d/\nc d/space.txt  1\nempty/\nlink -> ../outside\n"; res.IsError || res.Output != want {
		t.Fatalf("recursive: %q, want %q", res.Output, want)
	}
	res = call(t, "list_files", ws, map[string]any{"path": "a", "recursive": true}, "")
	if want := "deep/\ndeep/y.md  0\nx.go  9\n"; res.IsError || res.Output != want {
		t.Fatalf("recursive a: %q, want %q", res.Output, want)
	}
	if res := call(t, "list_files", ws, map[string]any{"path": "empty"}, ""); res.Output != "(empty folder)" {
		t.Fatalf("empty: %q", res.Output)
	}
	if res := call(t, "list_files", ws, map[string]any{"path": "b.txt"}, ""); res.Output != "b.txt  2\n" {
		t.Fatalf("a file: %q", res.Output)
	}
	wantError(t, call(t, "list_files", ws, map[string]any{"path": "nope"}, ""), "path nope does not exist")
}

func TestListFilesCap(t *testing.T) {
	ws, _ := workspace(t, nil)
	// 3000 lines of 30 bytes: more than 64 KiB.
	for i := range 3000 {
		write(t, filepath.Join(ws, "d", fmt.Sprintf("file-with-a-long-name-%04d", i)), "x")
	}
	for _, recursive := range []bool{false, true} {
		res := call(t, "list_files", ws, map[string]any{"path": "d", "recursive": recursive}, "")
		if !res.Cut || res.IsError {
			t.Fatalf("recursive %v: not cut: %d bytes", recursive, len(res.Output))
		}
		lines := strings.Count(res.Output, "\n")
		note := fmt.Sprintf("[list_files: cut at 64 KiB after %d entries; list a folder further down to see the rest]", lines)
		if !strings.HasSuffix(res.Output, note) || len(res.Output) > OutputCap+len(note) {
			t.Fatalf("recursive %v: %d bytes ending %q", recursive, len(res.Output), res.Output[len(res.Output)-120:])
		}
		if !strings.HasPrefix(res.Output, "file-with-a-long-name-0000  1\nfile-with-a-long-name-0001  1\n") {
			t.Fatalf("not sorted: %q", res.Output[:80])
		}
	}
}

func TestWriteFile(t *testing.T) {
	ws, _ := workspace(t, map[string]string{"run.sh": "old"})
	if err := os.Chmod(filepath.Join(ws, "run.sh"), 0o750); err != nil {
		t.Fatal(err)
	}
	content := "line 1\nünïcode\n\x01 exact bytes, no newline at the end"
	res := call(t, "write_file", ws, map[string]any{"path": "new/deeper/f.txt", "content": content}, "op1")
	wantOK(t, res)
	if res.Output != fmt.Sprintf("created new/deeper/f.txt (%d bytes)", len(content)) {
		t.Fatalf("output %q", res.Output)
	}
	if data, err := os.ReadFile(filepath.Join(ws, "new", "deeper", "f.txt")); err != nil || string(data) != content {
		t.Fatalf("content %q, %v", data, err)
	}
	res = call(t, "write_file", ws, map[string]any{"path": "run.sh", "content": "#!/bin/sh\n"}, "op2")
	if res.IsError || res.Output != "replaced run.sh (10 bytes)" {
		t.Fatalf("%+v", res)
	}
	fi, err := os.Stat(filepath.Join(ws, "run.sh"))
	if err != nil || fi.Mode().Perm() != 0o750 {
		t.Fatalf("the replaced file's mode: %v, %v", fi.Mode(), err)
	}
	res = call(t, "write_file", ws, map[string]any{"path": "empty.txt", "content": ""}, "op3")
	wantOK(t, res)
	// Nothing else is left: no temporary file anywhere.
	var names []string
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(ws, p)
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if want := ". empty.txt new new/deeper new/deeper/f.txt run.sh"; strings.Join(names, " ") != want {
		t.Fatalf("the workspace holds %v, want %s", names, want)
	}

	wantError(t, call(t, "write_file", ws, map[string]any{"path": ".", "content": "x"}, "op"), "the workspace itself")
	wantError(t, call(t, "write_file", ws, map[string]any{"path": "new", "content": "x"}, "op"), "path new is a folder")
	wantError(t, call(t, "write_file", ws, map[string]any{"path": "run.sh/x/y", "content": "x"}, "op"), "path run.sh/x/y goes through a file as if it were a folder")
}

// write_file's status check says committed when the file holds what the
// call asked for, and cannot tell otherwise.
func TestWriteFileStatus(t *testing.T) {
	ws, _ := workspace(t, map[string]string{"a.txt": "old"})
	tl, _ := Builtin("write_file")
	args, _ := json.Marshal(map[string]any{"path": "a.txt", "content": "new"})
	c := Call{Workspace: ws, Arguments: args, OperationID: "op1"}
	if got, err := tl.Check(context.Background(), c); err != nil || got != session.CheckUnknown {
		t.Fatalf("before: %v, %v", got, err)
	}
	if _, err := tl.Run(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if got, err := tl.Check(context.Background(), c); err != nil || got != session.CheckCommitted {
		t.Fatalf("after: %v, %v", got, err)
	}
}
