package tool

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/tern-dev/tern/internal/procgroup"
)

// landlockABI is the Landlock ABI this kernel offers: 0 when it has none
// (older than Linux 5.13, or booted without landlock among its LSMs).
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// Confinement says, for a person, how this machine confines shell's
// commands: "confined by Landlock ABI N", or "unconfined: " and why.
func Confinement() string {
	if v := landlockABI(); v > 0 {
		return fmt.Sprintf("confined by Landlock ABI %d", v)
	}
	return "unconfined: this kernel offers no Landlock (it needs Linux 5.13 or later, booted with landlock among its LSMs, lsm=...,landlock)"
}

// startShell starts cmd, a shell command run in workspace for the node
// whose home is home, confined by Landlock where the kernel has it
// (confinement says to what), and unconfined where it does not. The
// command's process group leader is its child: call release once it has
// exited (procgroup.SpawnConfined).
func startShell(cmd *exec.Cmd, home, workspace string) (release func(), err error) {
	seclude()
	abi := landlockABI()
	if abi == 0 {
		return func() {}, procgroup.Start(cmd)
	}
	fd, flags, err := landlockRuleset(abi, home, workspace, os.TempDir())
	if err != nil {
		return nil, fmt.Errorf("the command cannot be confined (Landlock ABI %d): %w", abi, err)
	}
	if fd < 0 {
		return func() {}, procgroup.Start(cmd)
	}
	defer unix.Close(fd)
	return procgroup.SpawnConfined(func() error {
		if err := dropCapabilities(); err != nil {
			return err
		}
		// The thread's own, inherited by the command: no program it
		// runs gains privileges (setuid), which Landlock requires.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
			return fmt.Errorf("landlock_restrict_self: %w", err)
		}
		return nil
	}, cmd.Start)
}

var secludeOnce sync.Once

// seclude makes this process not dumpable, once and for good, before it
// starts a program of the agent's: the kernel then lets no process of
// the same user without CAP_SYS_PTRACE read its memory or its
// environment (/proc/PID/mem, /proc/PID/environ, where the password of
// the node's secrets may be), nor trace it, nor dump its core. Landlock
// does not stop a confined command from reading /proc/PID/environ of a
// process of the same user outside its domain; this does.
func seclude() {
	secludeOnce.Do(func() { unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) })
}

// dropCapabilities leaves the calling thread, and so the command started
// from it, no capability to gain: none inherited as ambient, and, for a
// node running as root (whose programs get every capability of the
// bounding set), none in the bounding set. A command of a root node then
// keeps uid 0 but cannot trace the node (CAP_SYS_PTRACE), read kernel
// memory (CAP_SYS_RAWIO), load a module or mount a file system.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	if unix.Geteuid() != 0 {
		return nil // with no_new_privs, no program it runs gains a capability
	}
	for c := 0; ; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		switch {
		case errors.Is(err, unix.EINVAL): // past the kernel's last capability
			return nil
		case err != nil:
			return fmt.Errorf("drop capability %d from the bounding set: %w (a node running as root needs CAP_SETPCAP to confine its commands; run it as an ordinary user)", c, err)
		}
	}
}

// landlockRuleset is the Landlock ruleset of confinement, for the kernel's
// ABI: every file right handled (from ABI 9, connecting to a path-named
// UNIX socket made outside the command's domain too), and the scopes (a
// confined command signals no process and reaches no abstract socket
// outside its own domain: not the node). The network is not restricted.
func landlockRuleset(abi int, home, workspace, temp string) (fd int, flags uint32, err error) {
	grants, err := confinement(realPath(home), realPath(workspace), realPath(temp), listDir)
	if err != nil {
		return -1, 0, err
	}
	var rules []landlock.Rule
	for _, g := range grants {
		rules = append(rules, landlock.PathAccess(rights(g, abi), g.path).IgnoreIfMissing())
	}
	cfg := landlock.Config{HandledAccessFS: landlock.V11.HandledAccessFS, Scoped: landlock.V11.Scoped}.BestEffort()
	return cfg.NewRulesetFD(rules...)
}

// Landlock's rights of files; the others are rights of folders.
const fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev

// rights are the Landlock rights of g.
func rights(g grant, abi int) landlock.AccessFSSet {
	var r uint64
	switch g.access {
	case readOnly:
		r = ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir
	case device:
		r = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev | ll.AccessFSReadDir
	case readWrite:
		// Not resolve_unix: a socket made outside the command's domain
		// (an ssh agent's, a session bus) is not the command's to reach,
		// even in the temporary folder; its own sockets it reaches anyway.
		r = uint64(landlock.V11.HandledAccessFS) &^ ll.AccessFSResolveUnix
		if abi < 2 {
			r &^= ll.AccessFSRefer // asked for on ABI 1, it would leave the command unconfined
		}
	}
	if g.file {
		r &= fileRights
	}
	return landlock.AccessFSSet(r)
}

// realPath is p absolute, without symbolic links where it exists.
func realPath(p string) string {
	if p == "" {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	if a, err := filepath.Abs(p); err == nil {
		p = a
	}
	return p
}

// listDir lists a folder for confinement. A folder that is gone has no
// entries.
func listDir(dir string) ([]dirEntry, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: make it readable by the node's user, or give the node a TERN_HOME elsewhere", err)
	}
	out := make([]dirEntry, 0, len(ents))
	for _, e := range ents {
		out = append(out, dirEntry{name: e.Name(), dir: e.IsDir(), link: e.Type()&fs.ModeSymlink != 0})
	}
	return out, nil
}
