package nemesis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/internal/linelog"
)

// ErrUnavailable means this machine cannot run the nemesis; the error
// wrapping it says what is missing.
var ErrUnavailable = errors.New("the nemesis cannot run here")

// Nodes is how many tern nodes a cluster runs.
const Nodes = 3

// Port is the port every node listens on, each at its own address.
const listenPort = 4001

// ClusterOptions is how a cluster runs.
type ClusterOptions struct {
	Tern      string // the tern binary every node runs
	Transport string // "tcp" or "quic": what the nodes listen on
	Dir       string // where the homes and the node logs go
	Seed      uint64 // the wire's random streams
	Faults    Faults // the wire's faults, in every direction
	Env       []string
}

// Cluster is Nodes tern node processes, each in a network namespace of
// its own, joined by a Wire, paired with each other, holding one agent
// that node 0 made.
type Cluster struct {
	opt   ClusterOptions
	wire  *Wire
	nss   []*namespace
	Nodes []*Node
	Agent string
}

// Node is one tern node process in its namespace.
type Node struct {
	I      int
	Name   string // n0, n1, …: the name its peers pair it under
	Home   string
	PeerID string
	c      *Cluster
	ns     *namespace
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has ended
	log    *linelog.Log  // its stderr, across restarts
	http   *http.Client

	mu   sync.Mutex
	info api.Info // its API's address and token, new at every start
}

// api is the address and token of the node's API now.
func (n *Node) api() api.Info {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.info
}

var clusters atomic.Int64

// StartCluster makes the namespaces and the wire, starts the nodes, pairs
// them, and makes the agent on node 0; it returns once every node holds a
// whole copy and node 0 runs it. On an error it removes what it made.
// Close removes it all.
func StartCluster(ctx context.Context, opt ClusterOptions) (_ *Cluster, err error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if opt.Transport != "tcp" && opt.Transport != "quic" {
		return nil, fmt.Errorf("cluster: transport %q: want tcp or quic", opt.Transport)
	}
	sweepLeftovers()
	c := &Cluster{opt: opt}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	k := clusters.Add(1)
	pid := os.Getpid()
	var ports []Port
	var addrs = make([]netip.Addr, 0, Nodes)
	for i := range Nodes {
		ns, err := makeNamespace(ctx, fmt.Sprintf("%s%d-%d-%d", nsPrefix, pid, k, i), fmt.Sprintf("tn%d_%d_%d", pid%100000, k%100, i), Addr(i).String())
		if err != nil {
			return nil, err
		}
		c.nss = append(c.nss, ns)
		ports = append(ports, ns.tun)
		addrs = append(addrs, Addr(i))
	}
	plan, err := NewPlan(opt.Seed, Nodes, opt.Faults)
	if err != nil {
		return nil, err
	}
	if c.wire, err = NewWire(plan, ports, addrs); err != nil {
		return nil, err
	}
	for i, ns := range c.nss {
		home := filepath.Join(opt.Dir, fmt.Sprintf("n%d", i))
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(opt.Dir, fmt.Sprintf("n%d.log", i)))
		if err != nil {
			return nil, err
		}
		n := &Node{I: i, Name: fmt.Sprintf("n%d", i), Home: home, c: c, ns: ns, log: &linelog.Log{Also: f}}
		n.http = &http.Client{Transport: &http.Transport{DialContext: ns.dial}, Timeout: 2 * time.Second}
		c.Nodes = append(c.Nodes, n)
		if err := n.Start(ctx); err != nil {
			return nil, err
		}
	}
	for _, n := range c.Nodes {
		for _, o := range c.Nodes {
			if o != n {
				if _, err := n.Tern(ctx, "peer", "add", o.PeerID, o.Addr(), "--name", o.Name); err != nil {
					return nil, err
				}
			}
		}
	}
	dir := filepath.Join(opt.Dir, "agent")
	out, err := c.Nodes[0].Tern(ctx, "capsule", "new", dir, "--name", "mover")
	if err != nil {
		return nil, err
	}
	c.Agent = strings.TrimSpace(out)
	if _, err := c.Nodes[0].Tern(ctx, "capsule", "import", dir); err != nil {
		return nil, err
	}
	err = waitFor(ctx, time.Minute, func() error {
		for _, n := range c.Nodes {
			if err := n.holdsWhole(ctx); err != nil {
				return err
			}
		}
		if !c.Nodes[0].Runs(ctx) {
			return fmt.Errorf("%s does not run the agent it made", c.Nodes[0].Name)
		}
		return nil
	})
	return c, err
}

// Close stops every node and removes the wire and the namespaces.
func (c *Cluster) Close() error {
	for _, n := range c.Nodes {
		n.Kill()
		if f, ok := n.log.Also.(io.Closer); ok {
			f.Close()
		}
	}
	if c.wire != nil {
		c.wire.Stop()
	}
	var errs []error
	for _, ns := range c.nss {
		errs = append(errs, ns.remove())
	}
	return errors.Join(errs...)
}

// Wire is the cluster's wire: cut, heal, set faults.
func (c *Cluster) Wire() *Wire { return c.wire }

// Addr is the multiaddr the node listens on.
func (n *Node) Addr() string {
	if n.c.opt.Transport == "quic" {
		return fmt.Sprintf("/ip4/%s/udp/%d/quic-v1", Addr(n.I), listenPort)
	}
	return fmt.Sprintf("/ip4/%s/tcp/%d", Addr(n.I), listenPort)
}

// Start runs the node's process in its namespace and waits until its API
// answers.
func (n *Node) Start(ctx context.Context) error {
	args := []string{"netns", "exec", n.ns.name, n.c.opt.Tern, "node", "--listen", n.Addr(), "--no-mdns", "--sync-interval", "1s"}
	cmd := exec.Command("ip", args...) // ip netns exec execs tern: the process is the node's
	cmd.Env = append(append(os.Environ(), "TERN_HOME="+n.Home), n.c.opt.Env...)
	cmd.SysProcAttr = childAttr()
	out := &linelog.Log{}
	stdout, err := linelog.Pipe(out, nil)
	if err != nil {
		return err
	}
	stderr, err := linelog.Pipe(n.log, nil)
	if err != nil {
		stdout.Close()
		return err
	}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	from := n.log.Len()
	err = spawn(cmd)
	stdout.Close()
	stderr.Close()
	if err != nil {
		return fmt.Errorf("start %s: %w", n.Name, err)
	}
	n.cmd, n.exited = cmd, make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(n.exited)
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	go func() {
		select {
		case <-n.exited:
			cancel() // it died: stop waiting for its API
		case <-wctx.Done():
		}
	}()
	if _, _, err := out.Await(wctx, 0, containing("api ")); err != nil {
		got, _, _ := n.log.Next(from)
		n.Kill()
		return fmt.Errorf("%s did not come up within 30 s; it logged:\n%s", n.Name, strings.Join(got, "\n"))
	}
	peerLine, _, _ := out.Next(0)
	for _, l := range peerLine {
		if id, ok := strings.CutPrefix(l, "peer "); ok {
			n.PeerID = id
		}
	}
	data, err := os.ReadFile(filepath.Join(n.Home, api.InfoFile))
	if err != nil {
		return fmt.Errorf("%s: %w", n.Name, err)
	}
	var info api.Info
	if err := json.Unmarshal(data, &info); err != nil {
		return fmt.Errorf("%s: %s: %w", n.Name, api.InfoFile, err)
	}
	n.mu.Lock()
	n.info = info
	n.mu.Unlock()
	return nil
}

// Kill ends the node's process with SIGKILL (and wakes it first if it was
// stopped) and waits for it.
func (n *Node) Kill() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.exited
	n.cmd = nil
}

// Stop ends the node cleanly (SIGTERM) and waits for it; SIGKILL after
// 10 s.
func (n *Node) Stop() {
	if n.cmd == nil {
		return
	}
	n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		n.cmd.Process.Signal(syscall.SIGKILL)
		<-n.exited
	}
	n.cmd = nil
}

// Pause stops the process (SIGSTOP), as a laptop's lid closing does.
func (n *Node) Pause() { n.cmd.Process.Signal(stopSignal) }

// Wake lets a paused process go on (SIGCONT).
func (n *Node) Wake() { n.cmd.Process.Signal(contSignal) }

// Tern runs the tern command with args as this node's machine: in its
// namespace, with its home. It returns the standard output; an error
// holds the standard error.
func (n *Node) Tern(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", n.ns.name, n.c.opt.Tern}, args...)...)
	cmd.Env = append(append(os.Environ(), "TERN_HOME="+n.Home), n.c.opt.Env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s: tern %s: %v: %s", n.Name, strings.Join(args, " "), err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// do calls the node's API: method on path with body, the JSON answer
// decoded into out.
func (n *Node) do(ctx context.Context, method, path string, body io.Reader, out any) error {
	info := n.api()
	req, err := http.NewRequestWithContext(ctx, method, info.API+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	resp, err := n.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", n.Name, method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return &api.APIError{Status: resp.StatusCode, Message: fmt.Sprintf("%s: %s %s: %s", n.Name, method, path, e.Error)}
	}
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func (n *Node) agentPath(suffix string) string {
	return "/v1/capsules/" + url.PathEscape(n.c.Agent) + suffix
}

// Holder is where the agent stands on this node, by its own account.
func (n *Node) Holder(ctx context.Context) (api.HolderReport, error) {
	var r api.HolderReport
	err := n.do(ctx, http.MethodGet, n.agentPath("/holder?peers=none"), nil, &r)
	return r, err
}

// Runs reports whether the node runs the agent now: it holds it active
// and nothing (a startup check, a promotion) holds it back.
func (n *Node) Runs(ctx context.Context) bool {
	r, err := n.Holder(ctx)
	return err == nil && running(r)
}

func running(r api.HolderReport) bool { return r.State == "active" && r.Note == "" }

// Status is the node's status.
func (n *Node) Status(ctx context.Context) (api.Status, error) {
	var st api.Status
	err := n.do(ctx, http.MethodGet, "/v1/status", nil, &st)
	return st, err
}

// capsule is the agent's entry in the node's status.
func (n *Node) capsule(ctx context.Context) (api.CapsuleStatus, error) {
	st, err := n.Status(ctx)
	if err != nil {
		return api.CapsuleStatus{}, err
	}
	for _, cs := range st.Capsules {
		if cs.ID == n.c.Agent {
			return cs, nil
		}
	}
	return api.CapsuleStatus{}, fmt.Errorf("%s does not hold the agent", n.Name)
}

func (n *Node) holdsWhole(ctx context.Context) error {
	cs, err := n.capsule(ctx)
	if err != nil {
		return err
	}
	if cs.Incomplete || cs.Damaged != "" {
		return fmt.Errorf("%s holds the agent but not whole (incomplete %v, damaged %q)", n.Name, cs.Incomplete, cs.Damaged)
	}
	return nil
}

// Append appends one message event with text to the agent through the
// node and returns its id once the node acknowledged it (durable there).
func (n *Node) Append(ctx context.Context, text string) (string, error) {
	line, _ := json.Marshal(map[string]any{"type": "message", "session": "s1", "turn": "t1",
		"body": map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": text}}}})
	var out struct {
		IDs []string `json:"ids"`
	}
	if err := n.do(ctx, http.MethodPost, n.agentPath("/events"), bytes.NewReader(append(line, '\n')), &out); err != nil {
		return "", err
	}
	if len(out.IDs) != 1 {
		return "", fmt.Errorf("%s: an append of one event acknowledged %d", n.Name, len(out.IDs))
	}
	return out.IDs[0], nil
}

// Migrate moves the agent from this node to to, waiting timeout for the
// outcome.
func (n *Node) Migrate(ctx context.Context, to *Node, timeout time.Duration) (api.Outcome, error) {
	body, _ := json.Marshal(api.MigrateRequest{To: to.PeerID, Timeout: timeout.String()})
	var out api.Outcome
	ctx, cancel := context.WithTimeout(ctx, timeout+10*time.Second)
	defer cancel()
	info := n.api()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, info.API+n.agentPath("/migrate"), bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	hc := &http.Client{Transport: n.http.Transport} // no 2 s limit: a move takes its timeout
	resp, err := hc.Do(req)
	if err != nil {
		return out, fmt.Errorf("%s: migrate to %s: %w", n.Name, to.Name, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		var e struct {
			Error string `json:"error"`
		}
		json.NewDecoder(resp.Body).Decode(&e)
		return out, fmt.Errorf("%s: migrate to %s: %s", n.Name, to.Name, e.Error)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}

// waitFor calls check until it returns nil, every 50 ms, for at most
// within; it returns check's last error if within passes first.
func waitFor(ctx context.Context, within time.Duration, check func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if errors.Is(err, errViolated) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", within, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// nsPrefix starts the name of every namespace a nemesis makes, followed
// by its process id.
const nsPrefix = "tnem-"

// sweepLeftovers deletes the namespaces of nemesis processes that died
// without removing them.
func sweepLeftovers() {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(out), "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(l), " ")
		rest, ok := strings.CutPrefix(name, nsPrefix)
		if !ok {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			continue // its nemesis still runs
		}
		exec.Command("ip", "netns", "del", name).Run()
	}
}
