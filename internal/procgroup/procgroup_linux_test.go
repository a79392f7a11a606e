package procgroup

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The main goroutine keeps the main thread: Go never ends that thread (it
// wedges it instead), so a test goroutine that locks its thread and returns
// must not run there for its thread to end.
func init() { runtime.LockOSThread() }

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, in string
		want     stat
		err      bool
	}{
		{name: "a plain line", in: "4242 (sleep) S 1 4240 4240 0 -1 4194304 95 0 0 0 0 0 0 0 20 0 1 0 987654 2678784 128 18446744073709551615",
			want: stat{state: 'S', pgrp: 4240, start: 987654}},
		{name: "a name with spaces and parentheses", in: "7 (a) b (c) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0",
			want: stat{state: 'Z', pgrp: 7, start: 55}},
		{name: "no name in parentheses", in: "7 sleep S 1 7 7", err: true},
		{name: "too few fields", in: "7 (sleep) S 1 7 7 0", err: true},
		{name: "a group that is no number", in: "7 (x) S 1 x 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55", err: true},
		{name: "a start that is no number", in: "7 (x) S 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5", err: true},
		{name: "a state of two letters", in: "7 (x) SS 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 5", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("parseStat(%q) = %+v, %v; want %+v, error %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte("4242 (sleep) S 1 4240 4240 0 -1 4194304 95 0 0 0 0 0 0 0 20 0 1 0 987654 2678784"))
	f.Add([]byte("7 (a) b (c) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if st, err := parseStat(b); err == nil && st.state == 0 {
			t.Fatalf("parsed %q without a state", b)
		}
	})
}

// group starts script under sh as the leader of a group of its own, held
// until release is called: then the leader exits, unless the script goes
// on. It returns the group and the first line the script printed.
func group(t *testing.T, script string) (g Group, line string, release func()) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script+"\nread hold")
	Prepare(cmd)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := Start(cmd); err != nil {
		t.Fatal(err)
	}
	g, err := Of(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-g.PGID, syscall.SIGKILL)
		in.Close()
		cmd.Wait()
	})
	line, _ = bufio.NewReader(out).ReadString('\n')
	released := false
	return g, strings.TrimSpace(line), func() {
		if !released {
			released = true
			in.Close()
			cmd.Wait()
		}
	}
}

// running reports whether pid is a process that is not a zombie.
func running(t *testing.T, pid int) bool {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	st, err := parseStat(b)
	return err == nil && st.state != 'Z' && st.state != 'X'
}

func pidOf(t *testing.T, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("no process id in %q", s)
	}
	return pid
}

// exitWatch is a pidfd of a process, or with unix.PIDFD_THREAD of a thread
// of this process, opened while it runs, so that its id cannot name
// another one by the time the test waits.
type exitWatch struct {
	fd   int // -1: it had exited when the watch was opened
	what string
}

func watchExit(t *testing.T, what string, pid, flags int) exitWatch {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, flags)
	if errors.Is(err, unix.ESRCH) {
		return exitWatch{fd: -1, what: what}
	}
	if err != nil {
		t.Fatalf("pidfd of %s (%d): %v", what, pid, err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return exitWatch{fd: fd, what: what}
}

// wait waits until the process or thread has exited (a zombie counts):
// the kernel makes its pidfd readable then. The 10 s bound guards against
// a hang only.
func (w exitWatch) wait(t *testing.T) {
	t.Helper()
	if w.fd < 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%s still runs after 10 s", w.what)
		}
		fds := []unix.PollFd{{Fd: int32(w.fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("waiting for %s to exit: %v", w.what, err)
		}
		if n > 0 {
			return
		}
	}
}

// End kills what the leader left in its group after it exited, and
// returns only once it is gone.
func TestEndEndsAGroupWhoseLeaderExitedAndWaitsForIt(t *testing.T) {
	g, line, release := group(t, "sleep 30 & echo $!")
	child := pidOf(t, line)
	release()
	if running(t, g.PGID) {
		t.Fatal("the leader still runs")
	}
	if !running(t, child) {
		t.Fatal("the leader's child is not running before End")
	}
	if err := End(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	if running(t, child) {
		t.Fatalf("process %d of the group runs after End returned", child)
	}
}

// A record of another boot, or one whose leader's id now names a process
// that started at another time, names a group that is gone: End kills
// nothing for it.
func TestEndSparesAGroupThatIsNotTheRecordedOne(t *testing.T) {
	g, line, _ := group(t, "sleep 30 & echo $!")
	child := pidOf(t, line)
	for _, tt := range []struct {
		name string
		rec  Group
	}{
		{"a record of another boot", Group{PGID: g.PGID, Start: g.Start, Boot: "another-boot"}},
		{"a record of an earlier leader with the same id", Group{PGID: g.PGID, Start: g.Start - 1, Boot: g.Boot}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := End(context.Background(), tt.rec); err != nil {
				t.Fatal(err)
			}
			// Had End killed the group, it would have waited for it to
			// be gone before returning.
			if !running(t, g.PGID) || !running(t, child) {
				t.Fatal("End killed a group that is not the recorded one")
			}
		})
	}
}

func TestEndRefusesGroupsANodeCannotHaveStarted(t *testing.T) {
	for _, pgid := range []int{0, 1, syscall.Getpgrp()} {
		if err := End(context.Background(), Group{PGID: pgid}); err == nil || !strings.Contains(err.Error(), "refusing") {
			t.Errorf("End of group %d: %v, want a refusal", pgid, err)
		}
	}
}

// A record kept while the group runs makes EndAll end the group, then
// removes it; what a Keep cut short left is removed; a record that is not
// one is named.
func TestARecordedGroupIsEndedAndForgotten(t *testing.T) {
	d := Dir(filepath.Join(t.TempDir(), "processes"))
	g, line, release := group(t, "sleep 30 & echo $!")
	child := pidOf(t, line)
	if err := d.Keep("op_1", g); err != nil {
		t.Fatal(err)
	}
	release()
	os.WriteFile(filepath.Join(string(d), ".op_2.json.tern-tmp-123"), []byte("{"), 0o600)
	names, err := d.EndAll(context.Background())
	if err != nil || len(names) != 1 || names[0] != "op_1" {
		t.Fatalf("EndAll: %v, %v", names, err)
	}
	if running(t, child) {
		t.Fatal("the recorded group's child runs after EndAll")
	}
	if ents, _ := os.ReadDir(string(d)); len(ents) != 0 {
		t.Fatalf("left in the folder: %v", ents)
	}
	if err := d.End(context.Background(), "op_1"); err != nil {
		t.Fatalf("End without a record: %v", err)
	}

	os.WriteFile(filepath.Join(string(d), "op_3.json"), []byte(`{"pgid": 1}`), 0o600)
	if err := d.End(context.Background(), "op_3"); err == nil || !strings.Contains(err.Error(), "op_3.json is not a record") {
		t.Fatalf("a bad record: %v", err)
	}
	if err := d.Keep("../x", g); err == nil {
		t.Fatal("a name with a slash was taken")
	}
	if err := Dir("").Keep("op_4", g); err != nil {
		t.Fatalf("the zero Dir: %v", err)
	}
}

// A child started by Spawn survives a goroutine that locks its OS thread
// and returns (Go then ends the thread): a child forked on that thread
// gets its parent-death signal there and then (golang/go#27505).
func TestSpawnedChildrenOutliveThreadsThatExit(t *testing.T) {
	started := make(chan [2]*exec.Cmd)
	go func() {
		runtime.LockOSThread() // never unlocked: this thread ends when the goroutine returns
		control := exec.Command("sleep", "30")
		Prepare(control)
		if err := control.Start(); err != nil {
			t.Error(err)
		}
		spawned := exec.Command("sleep", "30")
		Prepare(spawned)
		if err := Start(spawned); err != nil {
			t.Error(err)
		}
		started <- [2]*exec.Cmd{control, spawned}
	}()
	cmds := <-started
	control, spawned := cmds[0], cmds[1]
	t.Cleanup(func() { spawned.Process.Kill(); spawned.Wait() })
	err := control.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the control child, forked on the thread that ended: %v; want it killed by SIGKILL", err)
	}
	// The kernel signals every child of an ending thread as it ends: the
	// spawned one, were it the thread's, would be dead now too.
	if !running(t, spawned.Process.Pid) {
		t.Fatal("the child started by Spawn died with a thread that ended")
	}
}

// A child started with Prepare and Start dies when its parent process is
// killed with SIGKILL.
func TestAChildDiesWithItsParent(t *testing.T) {
	if os.Getenv("PROCGROUP_TEST_PARENT") == "1" {
		cmd := exec.Command("sleep", "30")
		Prepare(cmd)
		if err := Start(cmd); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		io.Copy(io.Discard, os.Stdin) // until the test kills this process (or its stdin ends)
		os.Exit(0)
	}
	parent := exec.Command(os.Args[0], "-test.run=^TestAChildDiesWithItsParent$")
	parent.Env = append(os.Environ(), "PROCGROUP_TEST_PARENT=1")
	out, _ := parent.StdoutPipe()
	parent.StdinPipe() // open until the parent ends
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		parent.Process.Kill()
		t.Fatalf("the parent said no child: %v", err)
	}
	child := pidOf(t, strings.TrimSpace(line))
	t.Cleanup(func() { syscall.Kill(child, syscall.SIGKILL) })
	exit := watchExit(t, fmt.Sprintf("the child %d, its parent killed,", child), child, 0)
	parent.Process.Kill()
	parent.Wait()
	go io.Copy(io.Discard, out)
	exit.wait(t)
	if running(t, child) {
		t.Fatalf("the child %d runs after its pidfd said it exited", child)
	}
}

// noNewPrivsThreads returns the threads of this process that have
// no_new_privs set.
func noNewPrivsThreads(t *testing.T) []string {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/self/task/" + task.Name() + "/status")
		if err == nil && strings.Contains(string(b), "\nNoNewPrivs:\t1\n") {
			out = append(out, task.Name())
		}
	}
	return out
}

// What confine does to its thread reaches the processes start starts
// there, and no other thread of the node nor the children it starts
// otherwise; the thread ends at release.
func TestSpawnConfinedChangesOneThreadAndWhatItStarts(t *testing.T) {
	if got := noNewPrivsThreads(t); len(got) != 0 {
		t.Skipf("threads %v of the test process already have no_new_privs", got)
	}
	nnp := func() error { return unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) }
	confined := exec.Command("sh", "-c", "grep NoNewPrivs /proc/self/status; read hold")
	in, _ := confined.StdinPipe()
	out, _ := confined.StdoutPipe()
	release, err := SpawnConfined(nnp, confined.Start)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if strings.TrimSpace(line) != "NoNewPrivs:\t1" {
		t.Fatalf("the child started on the confined thread says %q", line)
	}
	if got := noNewPrivsThreads(t); len(got) != 1 {
		t.Fatalf("threads with no_new_privs while the child runs: %v, want the one confined thread", got)
	}
	plain := exec.Command("grep", "NoNewPrivs", "/proc/self/status")
	Prepare(plain)
	var b strings.Builder
	plain.Stdout = &b
	if err := Start(plain); err != nil {
		t.Fatal(err)
	}
	plain.Wait()
	if strings.TrimSpace(b.String()) != "NoNewPrivs:\t0" {
		t.Fatalf("a child started by Start says %q", b.String())
	}
	in.Close()
	confined.Wait()
	tid, _ := strconv.Atoi(noNewPrivsThreads(t)[0])
	exit := watchExit(t, fmt.Sprintf("the confined thread %d, released,", tid), tid, unix.PIDFD_THREAD)
	release()
	exit.wait(t)
	if got := noNewPrivsThreads(t); len(got) != 0 {
		t.Fatalf("threads with no_new_privs after the confined one ended: %v", got)
	}
}

// A confine that fails starts nothing.
func TestSpawnConfinedStartsNothingWhenConfineFails(t *testing.T) {
	started := false
	_, err := SpawnConfined(func() error { return errors.New("no confinement") }, func() error { started = true; return nil })
	if err == nil || err.Error() != "no confinement" || started {
		t.Fatalf("err %v, started %v", err, started)
	}
}
