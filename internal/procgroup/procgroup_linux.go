package procgroup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// records: a record here tells a group apart from a later one.
const records = true

// Prepare makes cmd lead a process group of its own that gets SIGKILL
// when this process dies; start it with Start or Spawn. The signal does
// not reach what the leader starts: that stays in its group, which End
// ends.
func Prepare(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}

// PrepareSupervisor is Prepare for a leader that ends its own group when
// this process dies: it gets SIGTERM rather than SIGKILL, which it traps
// to kill the whole group, what it started included (the parent-death
// signal reaches the leader only).
func PrepareSupervisor(cmd *exec.Cmd) {
	Prepare(cmd)
	cmd.SysProcAttr.Pdeathsig = syscall.SIGTERM
}

// Spawn runs start, which starts processes, on an OS thread that lives as
// long as this process, and answers its error.
//
// Linux sends the parent-death signal when the thread that forked the
// child exits, not the process (golang/go#27505). Go ends a thread only
// when a goroutine that locked it returns still locked; any goroutine of
// any library that does so, on a thread that earlier forked a child of
// ours, would kill that child early. The spawning thread here is locked
// by one goroutine that never returns, so no other goroutine runs on it,
// and it exits only with the process. The child itself checks, right
// after setting the signal, that its parent is still there (Go's
// forkAndExecInChild), so a node that dies during the start kills it too.
func Spawn(start func() error) error {
	spawnOnce.Do(func() { go spawner() })
	done := make(chan error, 1)
	spawns <- func() { done <- start() }
	return <-done
}

var (
	spawnOnce sync.Once
	spawns    = make(chan func())
)

func spawner() {
	runtime.LockOSThread() // never unlocked: the thread is this goroutine's until the process exits
	for f := range spawns {
		f()
	}
}

// SpawnConfined runs confine, then start, on an OS thread of their own:
// confine may change that thread for good (a Landlock domain,
// no_new_privs), and the processes start starts inherit the change,
// while nothing else of this process ever runs on the thread. If confine
// fails, start does not run and its error is returned.
//
// The thread lives until release is called, and then ends. Call release
// once every process start started has exited (Wait returned): Linux
// sends a child its parent-death signal when the thread that forked it
// ends (see Spawn), so a child of a released thread gets it at once.
func SpawnConfined(confine, start func() error) (release func(), err error) {
	type answer struct {
		release func()
		err     error
	}
	answers := make(chan answer, 1)
	go func() {
		runtime.LockOSThread()
		if syscall.Gettid() == syscall.Getpid() {
			// The main thread, whose changes /proc/PID shows as the
			// whole process's (a command in the same Landlock domain
			// could read the node's environment there), and which Go
			// never ends. Held here, unchanged, another thread does it.
			release, err := SpawnConfined(confine, start)
			runtime.UnlockOSThread()
			answers <- answer{release, err}
			return
		}
		// Never unlocked from here: Go ends a thread whose goroutine
		// returns locked, so the changed thread is never reused.
		err := confine()
		if err == nil {
			err = start()
		}
		if err != nil {
			answers <- answer{err: err}
			return
		}
		done := make(chan struct{})
		var once sync.Once
		answers <- answer{release: func() { once.Do(func() { close(done) }) }}
		<-done
	}()
	a := <-answers
	return a.release, a.err
}

// Of returns the group pid leads: pid, its start time and this boot. The
// process must still exist (a zombie will do).
func Of(pid int) (Group, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Group{}, fmt.Errorf("procgroup: the start of process %d: %w", pid, err)
	}
	st, err := parseStat(b)
	if err != nil {
		return Group{}, fmt.Errorf("procgroup: /proc/%d/stat: %w", pid, err)
	}
	if st.pgrp != pid {
		return Group{}, fmt.Errorf("procgroup: process %d does not lead a process group (its group is %d): start it with Prepare", pid, st.pgrp)
	}
	boot, err := bootID()
	if err != nil {
		return Group{}, err
	}
	return Group{PGID: pid, Start: st.start, Boot: boot}, nil
}

func bootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", fmt.Errorf("procgroup: this boot's id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func end(ctx context.Context, g Group) error {
	if err := killable(g); err != nil {
		return err
	}
	if g.Boot != "" {
		boot, err := bootID()
		if err != nil {
			return err
		}
		if boot != g.Boot {
			return nil // the machine restarted since: nothing of the group runs
		}
	}
	var delay time.Duration
	for {
		left, err := members(g)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			return nil
		}
		// Only the group's own processes can hold its id while any of
		// them lives, so a signal to the group reaches no other.
		if err := syscall.Kill(-g.PGID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("procgroup: kill process group %d (processes %v): %w: kill them as their owner (kill -9 -%d)", g.PGID, left, err, g.PGID)
		}
		delay = pollDelay(delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("procgroup: process group %d still has processes %v after SIGKILL (stuck in the kernel?): %w", g.PGID, left, context.Cause(ctx))
		case <-time.After(delay):
		}
	}
}

// members returns the processes of g that are not zombies: those in
// process group g.PGID that started at or after its leader. None when a
// process with the leader's id started at another time: the id was
// reused, which the kernel allows only once no process is in the group.
func members(g Group) ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("procgroup: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("procgroup: list /proc: %w", err)
	}
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // gone meanwhile
		}
		st, err := parseStat(b)
		if err != nil {
			continue
		}
		if pid == g.PGID && st.start != g.Start {
			return nil, nil
		}
		if st.pgrp != g.PGID || st.start < g.Start || st.state == 'Z' || st.state == 'X' {
			continue
		}
		out = append(out, pid)
	}
	return out, nil
}

// stat is what end reads of /proc/PID/stat.
type stat struct {
	state byte   // field 3: R, S, D, Z (zombie), X (dead)…
	pgrp  int    // field 5
	start uint64 // field 22, in clock ticks after boot
}

// parseStat reads /proc/PID/stat. Field 2, the command's name, is in
// parentheses and may hold spaces and parentheses itself: the fields after
// it begin after the last ')'.
func parseStat(b []byte) (stat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, errors.New("no command name in parentheses")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return stat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	pgrp, err := strconv.Atoi(f[2])
	if err != nil {
		return stat{}, fmt.Errorf("process group %q: %w", f[2], err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return stat{}, fmt.Errorf("start time %q: %w", f[19], err)
	}
	return stat{state: f[0][0], pgrp: pgrp, start: start}, nil
}
