package tool

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// access is what a confined shell command may do beneath a path.
type access int

const (
	readOnly  access = iota // read files, list folders, run programs
	readWrite               // anything: create, write, rename, remove
	device                  // read and write a device and control it (a terminal, /dev/null)
)

// grant lets a confined command reach path, and what is beneath it, with
// access. file says path is no folder, so folder rights do not apply.
type grant struct {
	path   string
	access access
	file   bool
}

// dirEntry is one entry of a folder as confinement sees it.
type dirEntry struct {
	name string
	dir  bool // a folder (not a symbolic link to one)
	link bool // a symbolic link
}

// devices are the device files a confined command may use: what shell
// scripts and terminals expect. The rest of /dev (disks, memory) is
// hidden: reading a disk would read every file on it.
var devices = []grant{
	{path: "/dev/null", access: device, file: true},
	{path: "/dev/zero", access: device, file: true},
	{path: "/dev/full", access: device, file: true},
	{path: "/dev/tty", access: device, file: true},
	{path: "/dev/random", access: readOnly, file: true},
	{path: "/dev/urandom", access: readOnly, file: true},
	{path: "/dev/pts", access: device},
}

// confinement is what a shell command may reach, for the node whose home
// is home (empty: none) and a command run in workspace, with temp the
// system's temporary folder; all three absolute, clean and free of
// symbolic links. The command may read, list and run everything but the
// home and /dev; read and write the workspace and temp; and use the
// devices. The workspace may lie inside the home: it is the command's all
// the same, while the rest of the home stays hidden.
//
// Landlock grants rights beneath a path and never takes them back, so a
// hidden path's ancestors get no grant of their own: each ancestor's
// entries are granted one by one, but the one on the way to the hidden
// path, and so down to it (carve). A command can then open, but not list,
// an ancestor (ls / fails; cat /etc/hostname works). list gives a
// folder's entries; confinement fails if it fails on an ancestor of the
// home, naming it.
func confinement(home, workspace, temp string, list func(dir string) ([]dirEntry, error)) ([]grant, error) {
	hidden := []string{"/dev"}
	if home != "" {
		hidden = append(hidden, home)
	}
	var out []grant
	for _, g := range []grant{{path: "/", access: readOnly}, {path: temp, access: readWrite}, {path: workspace, access: readWrite}} {
		carved, err := carve(g, hidden, list)
		if err != nil {
			return nil, err
		}
		out = append(out, carved...)
	}
	return append(out, devices...), nil
}

// carve is g without what lies beneath the hidden paths: g itself when
// none lies beneath it, else a grant for each of its entries that leads to
// no hidden path, and the carving of each that does. A symbolic link gets
// no grant: the kernel checks a file where the link leads, under that
// path's own grants.
func carve(g grant, hidden []string, list func(dir string) ([]dirEntry, error)) ([]grant, error) {
	var inside []string
	for _, h := range hidden {
		if within(h, g.path) {
			inside = append(inside, h)
		}
	}
	switch {
	case len(inside) == 0:
		return []grant{g}, nil
	case slices.Contains(inside, g.path):
		return nil, nil
	}
	entries, err := list(g.path)
	if err != nil {
		return nil, fmt.Errorf("list %s, a folder on the way to %s, to grant its entries one by one: %w", g.path, strings.Join(inside, " and "), err)
	}
	var out []grant
	for _, e := range entries {
		p := path.Join(g.path, e.name)
		onTheWay := slices.ContainsFunc(inside, func(h string) bool { return within(h, p) })
		switch {
		case e.link:
		case onTheWay && e.dir:
			sub, err := carve(grant{path: p, access: g.access}, inside, list)
			if err != nil {
				return nil, err
			}
			out = append(out, sub...)
		case onTheWay:
		default:
			out = append(out, grant{path: p, access: g.access, file: !e.dir})
		}
	}
	return out, nil
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}
