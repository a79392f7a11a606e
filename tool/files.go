package tool

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/tern-dev/tern/session"
)

var readFileParams = []param{
	{name: "path", kind: "string", required: true, desc: "the file, relative to the workspace"},
	{name: "offset", kind: "integer", min: 0, desc: "the byte to start at (default 0); a cut output names the offset to read on from"},
	{name: "limit", kind: "integer", min: 1, max: OutputCap, desc: "the most bytes to return (default and at most 65536)"},
}

func readFile() Tool {
	return Tool{
		Name: "read_file",
		Description: "Read a text file of the workspace. At most 64 KiB come back at a time: " +
			"the output of a longer file ends with a note giving the offset to read on from.",
		Parameters: schema(readFileParams),
		Effect:     Pure,
		Run:        runReadFile,
	}
}

func runReadFile(ctx context.Context, call Call) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var a struct {
		Path   string `json:"path"`
		Offset int64  `json:"offset"`
		Limit  int64  `json:"limit"`
	}
	if msg := parseArgs(call.Arguments, readFileParams, &a); msg != "" {
		return failf("read_file: %s", msg)
	}
	p, msg := cleanPath(a.Path)
	if msg != "" {
		return failf("read_file: %s", msg)
	}
	root, err := openWorkspace(call.Workspace)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	// Non-blocking, so that a named pipe cannot hang the open; it is
	// refused just below.
	f, err := root.OpenFile(p, os.O_RDONLY|nonblock, 0)
	if err != nil {
		return failf("read_file: %s", describe(err, a.Path))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return failf("read_file: %s", describe(err, a.Path))
	}
	switch {
	case fi.IsDir():
		return failf("read_file: %s is a folder: list it with list_files", a.Path)
	case !fi.Mode().IsRegular():
		return failf("read_file: %s is not a regular file (%s)", a.Path, fi.Mode().Type())
	case a.Offset > fi.Size():
		return failf("read_file: offset %d is past the end of %s (%d bytes)", a.Offset, a.Path, fi.Size())
	}
	limit := int64(OutputCap)
	if a.Limit > 0 {
		limit = a.Limit
	}
	buf := make([]byte, min(limit, fi.Size()-a.Offset))
	n, err := io.ReadFull(io.NewSectionReader(f, a.Offset, limit), buf)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return failf("read_file: %s", describe(err, a.Path))
	}
	data := buf[:n]
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return failf("read_file: %s is not a text file (a NUL byte at byte %d)", a.Path, a.Offset+int64(i))
	}
	end := a.Offset + int64(len(data))
	more := end < fi.Size()
	if more {
		data = trimPartialRune(data)
		end = a.Offset + int64(len(data))
	}
	res := Result{Output: strings.ToValidUTF8(string(data), "\uFFFD")}
	if more {
		res.Cut = limit >= OutputCap
		res.Output += fmt.Sprintf("\n[read_file: bytes %d to %d of %d shown; read on with offset %d]", a.Offset, end, fi.Size(), end)
	}
	return res, nil
}

// trimPartialRune drops an incomplete UTF-8 sequence at the end of b, so
// that the next read starts on a character; unless that leaves nothing.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		if utf8.RuneStart(b[len(b)-i]) {
			if !utf8.FullRune(b[len(b)-i:]) && i < len(b) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}

var listFilesParams = []param{
	{name: "path", kind: "string", desc: `the folder, relative to the workspace (default ".", the workspace itself)`},
	{name: "recursive", kind: "boolean", desc: "list every folder below it too (default false)"},
}

func listFiles() Tool {
	return Tool{
		Name: "list_files",
		Description: "List a folder of the workspace, sorted: one line each, folders ending in /, files with their size in bytes, " +
			"symbolic links as name -> target. At most 64 KiB of listing comes back.",
		Parameters: schema(listFilesParams),
		Effect:     Pure,
		Run:        runListFiles,
	}
}

func runListFiles(ctx context.Context, call Call) (Result, error) {
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	var a struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if msg := parseArgs(call.Arguments, listFilesParams, &a); msg != "" {
		return failf("list_files: %s", msg)
	}
	if a.Path == "" {
		a.Path = "."
	}
	p, msg := cleanPath(a.Path)
	if msg != "" {
		return failf("list_files: %s", msg)
	}
	root, err := openWorkspace(call.Workspace)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	fi, err := root.Stat(p)
	if err != nil {
		return failf("list_files: %s", describe(err, a.Path))
	}
	if !fi.IsDir() {
		return Result{Output: fileLine(a.Path, fi)}, nil
	}

	var out strings.Builder
	entries, cut := 0, false
	add := func(name string, d fs.DirEntry) bool {
		var line string
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := root.Readlink(path.Join(p, name))
			if err != nil {
				target = "?"
			}
			line = name + " -> " + target + "\n"
		case d.IsDir():
			line = name + "/\n"
		default:
			info, err := d.Info()
			if err != nil {
				line = name + "  (gone)\n"
			} else {
				line = fileLine(name, info)
			}
		}
		if out.Len()+len(line) > OutputCap {
			cut = true
			return false
		}
		out.WriteString(line)
		entries++
		return true
	}

	fsys := root.FS()
	if a.Recursive {
		// WalkDir visits each folder's entries sorted and does not follow
		// symbolic links to folders.
		err = fs.WalkDir(fsys, p, func(q string, d fs.DirEntry, err error) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			name := strings.TrimPrefix(q, p+"/")
			if p == "." {
				name = q
			}
			if err != nil {
				if q == p {
					return err
				}
				out.WriteString(name + "/  (cannot list: " + describe(err, q) + ")\n")
				return nil
			}
			if q == p {
				return nil
			}
			if !add(name, d) {
				return fs.SkipAll
			}
			return nil
		})
	} else {
		var list []fs.DirEntry
		list, err = fs.ReadDir(fsys, p)
		for _, d := range list {
			if !add(d.Name(), d) {
				break
			}
		}
	}
	if ctx.Err() != nil {
		return Result{}, ctx.Err()
	}
	if err != nil {
		return failf("list_files: %s", describe(err, a.Path))
	}
	if out.Len() == 0 && !cut {
		return Result{Output: "(empty folder)"}, nil
	}
	res := Result{Output: out.String(), Cut: cut}
	if cut {
		res.Output += fmt.Sprintf("[list_files: cut at 64 KiB after %d entries; list a folder further down to see the rest]", entries)
	}
	return res, nil
}

// fileLine is a listing's line for a file that is not a folder.
func fileLine(name string, fi fs.FileInfo) string {
	if fi.Mode().IsRegular() {
		return fmt.Sprintf("%s  %d\n", name, fi.Size())
	}
	return fmt.Sprintf("%s  (%s)\n", name, fi.Mode().Type())
}

var writeFileParams = []param{
	{name: "path", kind: "string", required: true, desc: "the file, relative to the workspace; missing folders on the way are created"},
	{name: "content", kind: "string", required: true, desc: "the file's whole new content"},
}

func writeFile() Tool {
	return Tool{
		Name: "write_file",
		Description: "Write a text file of the workspace, replacing it whole if it exists and creating the folders it needs. " +
			"The write is atomic: the file holds either its old content or the new one, never a mix.",
		Parameters: schema(writeFileParams),
		Effect:     Idempotent,
		Approval:   true,
		Run:        runWriteFile,
		Status:     writeFileStatus,
	}
}

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

func runWriteFile(ctx context.Context, call Call) (Result, error) {
	var a writeFileArgs
	if msg := parseArgs(call.Arguments, writeFileParams, &a); msg != "" {
		return failf("write_file: %s", msg)
	}
	p, msg := cleanPath(a.Path)
	if msg != "" {
		return failf("write_file: %s", msg)
	}
	if p == "." {
		return failf("write_file: path %s is the workspace itself, not a file", a.Path)
	}
	if err := ctx.Err(); err != nil {
		return Result{}, err
	}
	root, err := openWorkspace(call.Workspace)
	if err != nil {
		return Result{}, err
	}
	defer root.Close()
	dirName, base := path.Split(p)
	if dirName == "" {
		dirName = "."
	}
	if err := root.MkdirAll(dirName, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			err = syscall.ENOTDIR // a file stands where a folder should be
		}
		return failf("write_file: %s", describe(err, a.Path))
	}
	// Every step below happens in the one folder this opens, whatever
	// is renamed or linked meanwhile.
	dir, err := root.OpenRoot(dirName)
	if err != nil {
		return failf("write_file: %s", describe(err, a.Path))
	}
	defer dir.Close()

	perm, existed := fs.FileMode(0o644), false
	fi, err := dir.Lstat(base)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		if _, err := root.Stat(p); escapes(err) {
			return failf("write_file: %s", describe(err, a.Path))
		}
		target, _ := dir.Readlink(base)
		return failf("write_file: path %s is a symbolic link (to %s): write to the file it points to", a.Path, target)
	case err == nil && fi.IsDir():
		return failf("write_file: path %s is a folder", a.Path)
	case err == nil && !fi.Mode().IsRegular():
		return failf("write_file: path %s is not a regular file (%s)", a.Path, fi.Mode().Type())
	case err == nil:
		perm, existed = fi.Mode().Perm(), true
	case !errors.Is(err, fs.ErrNotExist):
		return failf("write_file: %s", describe(err, a.Path))
	}

	// The temporary file is named like capsule's (".<name>.tern-tmp-…").
	tmp := "." + base
	if len(tmp) > 160 {
		tmp = tmp[:160]
	}
	tmp += ".tern-tmp-" + rand.Text()
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return failf("write_file: %s", describe(err, a.Path))
	}
	err = writeAndSync(f, a.Content, perm, existed)
	if err == nil {
		err = dir.Rename(tmp, base)
	}
	if err != nil {
		dir.Remove(tmp)
		return failf("write_file: %s", describe(err, a.Path))
	}
	if err := syncDir(dir); err != nil {
		return failf("write_file: wrote %s, but could not make the write durable: %v", a.Path, err)
	}
	verb := "created"
	if existed {
		verb = "replaced"
	}
	return Result{Output: fmt.Sprintf("%s %s (%d bytes)", verb, a.Path, len(a.Content))}, nil
}

// writeAndSync fills the temporary file f, gives it the replaced file's
// permissions (not the umask's) and makes it durable.
func writeAndSync(f *os.File, content string, perm fs.FileMode, existed bool) error {
	_, err := io.WriteString(f, content)
	if err == nil && existed {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncDir fsyncs the folder so that the rename in it is durable.
func syncDir(dir *os.Root) error {
	d, err := dir.Open(".")
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeFileStatus says committed when the file holds exactly the content
// the call asked for; otherwise it cannot tell (the file may have changed
// since), and an idempotent write is simply done again.
func writeFileStatus(ctx context.Context, call Call) (session.Check, error) {
	var a writeFileArgs
	if parseArgs(call.Arguments, writeFileParams, &a) != "" {
		return session.CheckUnknown, nil
	}
	p, msg := cleanPath(a.Path)
	if msg != "" || p == "." {
		return session.CheckUnknown, nil
	}
	root, err := openWorkspace(call.Workspace)
	if err != nil {
		return session.CheckUnknown, err
	}
	defer root.Close()
	data, err := root.ReadFile(p)
	if err == nil && string(data) == a.Content {
		return session.CheckCommitted, nil
	}
	return session.CheckUnknown, nil
}
