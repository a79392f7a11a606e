package tool

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// fakeDirs lists the folders of a made-up machine; a folder that maps
// to nil cannot be listed.
type fakeDirs map[string][]dirEntry

func (f fakeDirs) list(dir string) ([]dirEntry, error) {
	ents, ok := f[dir]
	if ok && ents == nil {
		return nil, errors.New("permission denied")
	}
	return ents, nil
}

func d(name string) dirEntry { return dirEntry{name: name, dir: true} }
func f(name string) dirEntry { return dirEntry{name: name} }
func l(name string) dirEntry { return dirEntry{name: name, link: true} }

func (g grant) String() string {
	kind := map[access]string{readOnly: "read", readWrite: "write", device: "device"}[g.access]
	if g.file {
		kind += " file"
	}
	return fmt.Sprintf("%s %s", kind, g.path)
}

func TestShellConfinementGrants(t *testing.T) {
	machine := fakeDirs{
		"/":                        {l("bin"), d("dev"), d("etc"), d("home"), d("proc"), d("root"), d("tmp"), d("usr"), f("swapfile")},
		"/home":                    {d("alice"), d("bob")},
		"/home/alice":              {f(".bashrc"), d(".local"), d("projects"), l("tern-link")},
		"/home/alice/.local":       {d("share"), d("state")},
		"/home/alice/.local/share": {d("fonts"), d("tern")},
		"/tmp":                     {d("tern-home"), f("x")},
	}
	devs := []string{"device /dev/pts", "device file /dev/full", "device file /dev/null", "device file /dev/tty", "device file /dev/zero", "read file /dev/random", "read file /dev/urandom"}
	tests := []struct {
		name                 string
		home, workspace, tmp string
		dirs                 fakeDirs
		want                 []string // besides the devices
		err                  string
	}{
		{name: "a home deep in a user's folder: what lies beside each folder on the way to it is granted, the way itself is not",
			home: "/home/alice/.local/share/tern", workspace: "/home/alice/.local/share/tern/workspaces/a", tmp: "/tmp", dirs: machine,
			want: []string{
				"read /etc", "read /home/alice/.local/share/fonts", "read /home/alice/.local/state", "read /home/alice/projects", "read /home/bob",
				"read /proc", "read /root", "read /tmp", "read /usr", "read file /home/alice/.bashrc", "read file /swapfile",
				"write /home/alice/.local/share/tern/workspaces/a", "write /tmp",
			}},
		{name: "without a home only /dev is hidden",
			workspace: "/srv/ws", tmp: "/tmp", dirs: machine,
			want: []string{"read /etc", "read /home", "read /proc", "read /root", "read /tmp", "read /usr", "read file /swapfile", "write /srv/ws", "write /tmp"}},
		{name: "a home inside the temporary folder is carved out of writing too",
			home: "/tmp/tern-home", workspace: "/tmp/tern-home/workspaces/a", tmp: "/tmp", dirs: machine,
			want: []string{"read /etc", "read /home", "read /proc", "read /root", "read /usr", "read file /swapfile", "read file /tmp/x",
				"write /tmp/tern-home/workspaces/a", "write file /tmp/x"}},
		{name: "a temporary folder inside the home stays the command's, like the workspace",
			home: "/root", workspace: "/root/workspaces/a", tmp: "/root/tmp", dirs: machine,
			want: []string{"read /etc", "read /home", "read /proc", "read /tmp", "read /usr", "read file /swapfile", "write /root/tmp", "write /root/workspaces/a"}},
		{name: "a folder on the way to the home that cannot be listed fails, naming it",
			home: "/home/alice/.local/share/tern", workspace: "/ws", tmp: "/tmp",
			dirs: fakeDirs{"/": {d("home")}, "/home": {d("alice")}, "/home/alice": nil},
			err:  "list /home/alice, a folder on the way to /home/alice/.local/share/tern, to grant its entries one by one: permission denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			grants, err := confinement(tt.home, tt.workspace, tt.tmp, tt.dirs.list)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("err %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range grants {
				got = append(got, g.String())
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(append(slices.Clone(tt.want), devs...)))
			if !slices.Equal(got, want) {
				t.Fatalf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
			}
			for _, g := range grants {
				if tt.home != "" && within(tt.home, g.path) {
					t.Errorf("%s grants the home %s", g, tt.home)
				}
			}
		})
	}
}
