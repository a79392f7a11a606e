package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/internal/linelog"
	"github.com/tern-dev/tern/node"
)

// daemon is a tern node running as its own process.
type daemon struct {
	t    *testing.T
	home string
	port int
	quic bool // listen on QUIC only (libp2p's choice between two machines), else TCP only
	// strict: tern node --strict (an agent held at the stop runs again only
	// after a paired peer confirms no other node took it over).
	strict bool
	cmd    *exec.Cmd
	// log is what the node logs, line by line, kept across its restarts.
	log *linelog.Log
}

// addr is the multiaddr the daemon listens on.
func (d *daemon) addr() string {
	if d.quic {
		return fmt.Sprintf("/ip4/127.0.0.1/udp/%d/quic-v1", d.port)
	}
	return fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", d.port)
}

// freePort is a port free on 127.0.0.1 for TCP and for UDP at this moment.
func freePort(t *testing.T) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return 0
}

// start runs the daemon and waits until its API answers: tern node
// prints the API's address once the node has started.
func (d *daemon) start() {
	d.t.Helper()
	os.Remove(filepath.Join(d.home, node.InfoFile))
	args := []string{"node", "--listen", d.addr(), "--no-mdns", "--sync-interval", "500ms"}
	if d.strict {
		args = append(args, "--strict")
	}
	if d.log == nil {
		d.log = &linelog.Log{}
	}
	logged := d.log.Len()
	d.cmd = ternProcess(d.home, "", args...)
	out := &linelog.Log{}
	stdout, err := linelog.Pipe(out, out.End)
	if err != nil {
		d.t.Fatal(err)
	}
	stderr, err := linelog.Pipe(d.log, nil)
	if err != nil {
		d.t.Fatal(err)
	}
	d.cmd.Stdout, d.cmd.Stderr = stdout, stderr
	err = d.cmd.Start()
	stdout.Close()
	stderr.Close()
	if err != nil {
		d.t.Fatal(err)
	}
	if _, _, err := awaitLine(out, 0, 30*time.Second, func(line string) bool { return strings.HasPrefix(line, "api ") }); err != nil {
		lines, _, _ := d.log.Next(logged)
		d.t.Fatalf("the daemon on %s did not come up: %v; it logged:\n%s", d.home, err, strings.Join(lines, "\n"))
	}
}

// kill kills the daemon with SIGKILL.
func (d *daemon) kill() {
	d.cmd.Process.Signal(syscall.SIGKILL)
	d.cmd.Wait()
}

// ternQuiet runs tern as a process and returns its exit code and output.
func ternQuiet(home string, args ...string) (int, string, string) {
	cmd := ternProcess(home, "", args...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
	}
	return code, out.String(), errb.String()
}

// holderOf asks d's daemon where the agent stands; a zero report if it
// does not answer.
func (d *daemon) holderOf(agent string) api.HolderReport {
	var r api.HolderReport
	code, out, _ := ternQuiet(d.home, "holder", agent, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil {
		return api.HolderReport{}
	}
	return r
}

// moveStages are the points of a move at which the test below kills a
// node: as the move starts, once the source logs that it froze, once the
// target logs that it activated, once the source logs its commit, and
// once the move has ended.
var moveStages = []string{"the start", "fencing: frozen", "fencing: activated", "fencing: commit", "the end"}

// awaitMoveStage waits until either daemon logs stage (one of moveStages)
// after the lines marks counted, or ended is closed: a move that went
// another way never logs it. It returns whether the stage came.
func awaitMoveStage(t *testing.T, ds [2]*daemon, marks [2]int, stage string, ended <-chan struct{}) bool {
	t.Helper()
	switch stage {
	case moveStages[0]:
		return true
	case moveStages[len(moveStages)-1]:
		<-ended
		return true
	}
	deadline := time.After(time.Minute) // a move ends within its 5 s timeout and tern's 30 s more
	for {
		var changed [2]<-chan struct{}
		for i, d := range ds {
			var lines []string
			lines, _, changed[i] = d.log.Next(marks[i])
			for _, line := range lines {
				if strings.Contains(line, stage+" ") {
					return true
				}
			}
			marks[i] += len(lines)
		}
		select {
		case <-changed[0]:
		case <-changed[1]:
		case <-ended:
			return false
		case <-deadline:
			t.Fatalf("the move neither logged %q nor ended within a minute", stage)
		}
	}
}

// Migrations back and forth between two daemons, with kill -9 of either at
// a random point of a move (moveStages): polled through tern holder, the
// two never both hold the agent active, and after the last restart
// exactly one does.
func TestMigrationsWithKillNineNeverShowTwoActiveHolders(t *testing.T) {
	if testing.Short() {
		t.Skip("runs and kills daemons")
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 9))
	ds := pairedDaemons(t)
	dir := filepath.Join(t.TempDir(), "agent")
	code, out, errs := ternQuiet(ds[0].home, "capsule", "new", dir, "--name", "mover")
	if code != 0 {
		t.Fatal(errs)
	}
	agent := strings.TrimSpace(out)
	if code, _, errs := ternQuiet(ds[0].home, "capsule", "import", dir); code != 0 {
		t.Fatal(errs)
	}

	violations := 0
	check := func() {
		r0 := ds[0].holderOf(agent)
		r1 := ds[1].holderOf(agent)
		r0b := ds[0].holderOf(agent)
		if r0.State == "active" && r0b.State == "active" && r0.Epoch == r0b.Epoch && r1.State == "active" {
			violations++
			t.Errorf("both hold the agent active: n0 at %d, n1 at %d", r0.Epoch, r1.Epoch)
		}
	}
	// single waits until exactly one node holds the agent active and
	// returns it; with runs, until that node also runs it (its startup
	// check, which asks the other node, is over, and no activation is
	// under way): a move starts from there. Every poll checks for two
	// active holders too.
	single := func(within time.Duration, runs bool) (int, error) {
		var holder int
		err := poll(within, func() error {
			check()
			var rs [2]api.HolderReport
			for i, d := range ds {
				rs[i] = d.holderOf(agent)
			}
			for i, r := range rs {
				if r.State == "active" && rs[1-i].State != "active" && (!runs || r.Note == "") {
					holder = i
					return nil
				}
			}
			return fmt.Errorf("no single holder that runs the agent: n0 %s (%s), n1 %s (%s)", rs[0].State, rs[0].Note, rs[1].State, rs[1].Note)
		})
		return holder, err
	}
	// One clean move first: moving works at all.
	from, err := single(30*time.Second, true)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errs := ternQuiet(ds[from].home, "migrate", agent, "--to", fmt.Sprint("n", 1-from), "--timeout", "10s"); code != 0 {
		t.Fatalf("a clean move: exit %d: %s", code, errs)
	}
	// Eight rounds, and more (up to 24) until a move commits: a test
	// whose every kill came before the commit would prove little.
	committed := 0
	for round := 0; round < 8 || committed == 0 && round < 24; round++ {
		from, err := single(30*time.Second, true)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		marks := [2]int{ds[0].log.Len(), ds[1].log.Len()}
		mig := ternProcess(ds[from].home, "", "migrate", agent, "--to", fmt.Sprint("n", 1-from), "--timeout", "5s")
		var migErr strings.Builder
		mig.Stderr = &migErr
		if err := mig.Start(); err != nil {
			t.Fatal(err)
		}
		ended := make(chan struct{})
		go func() { mig.Wait(); close(ended) }()
		victim := ds[rng.IntN(2)]
		stage := moveStages[rng.IntN(len(moveStages))]
		reached := awaitMoveStage(t, ds, marks, stage, ended)
		victim.kill()
		check()
		<-ended
		t.Logf("round %d: move from n%d exited %d; killed %s at %s (reached: %v): %s", round, from, mig.ProcessState.ExitCode(), filepath.Base(victim.home), stage, reached, strings.TrimSpace(migErr.String()))
		if mig.ProcessState.ExitCode() == 0 {
			committed++
		}
		victim.start()
	}
	// Quiet: exactly one node holds the agent active.
	if _, err := single(60*time.Second, false); err != nil {
		t.Fatalf("after the kills: %v", err)
	}
	if violations > 0 {
		t.Fatalf("%d polls showed two active holders", violations)
	}
	if committed == 0 {
		t.Fatal("no move committed: the kills came too early every time, and the test proved little")
	}
}
