package nemesis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Available says what this machine lacks to run the nemesis, or nil: it
// needs root (to make network namespaces and TUN devices), the ip command
// and /dev/net/tun.
func Available() error {
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, fmt.Sprintf("root (this runs as uid %d; network namespaces and TUN devices need root)", os.Geteuid()))
	}
	if _, err := exec.LookPath("ip"); err != nil {
		missing = append(missing, "the ip command (iproute2) on PATH")
	}
	if f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0); err != nil {
		missing = append(missing, fmt.Sprintf("/dev/net/tun (%v)", err))
	} else {
		f.Close()
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: it needs %s", ErrUnavailable, strings.Join(missing, ", "))
	}
	return nil
}

// namespace is a network namespace made for one node, with the node's
// TUN device in it, its address on it, and its loopback up.
type namespace struct {
	name string
	dev  string
	tun  *os.File // the wire's end, opened here and moved in: it stays valid
}

// openTUN makes the TUN device name (IFF_TUN|IFF_NO_PI: each read and
// write is one IP packet), non-blocking so that Close ends a Read.
func openTUN(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUN device %q: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("make TUN device %q: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), nil
}

// ip runs the ip command.
func ip(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// makeNamespace makes the namespace name with the TUN device dev in it at
// address addr/24. On an error it removes what it made.
func makeNamespace(ctx context.Context, name, dev string, addr string) (_ *namespace, err error) {
	if err := ip(ctx, "netns", "add", name); err != nil {
		return nil, err
	}
	ns := &namespace{name: name, dev: dev}
	defer func() {
		if err != nil {
			ns.remove()
		}
	}()
	if ns.tun, err = openTUN(dev); err != nil {
		return nil, err
	}
	steps := [][]string{
		{"link", "set", dev, "netns", name},
		{"-n", name, "link", "set", "lo", "up"},
		{"-n", name, "addr", "add", addr + "/24", "dev", dev},
		{"-n", name, "link", "set", dev, "up"},
	}
	for _, s := range steps {
		if err := ip(ctx, s...); err != nil {
			return nil, err
		}
	}
	return ns, nil
}

// remove closes the TUN device and deletes the namespace (and the device
// with it). It is safe to call twice.
func (ns *namespace) remove() error {
	if ns.tun != nil {
		ns.tun.Close()
		ns.tun = nil
	}
	if ns.name == "" {
		return nil
	}
	err := ip(context.Background(), "netns", "del", ns.name)
	ns.name = ""
	return err
}

// in runs f on a thread that entered the namespace: the sockets f makes
// are the namespace's, and keep it once made. The thread goes back to the
// namespace it came from after; if it cannot, it is thrown away (its
// goroutine ends locked to it), so nothing else ever runs in the
// namespace.
func (ns *namespace) in(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("this thread's namespace: %w", err)
			return
		}
		defer back.Close()
		nsf, err := os.Open("/var/run/netns/" + ns.name)
		if err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("namespace %s: %w", ns.name, err)
			return
		}
		defer nsf.Close()
		if err := unix.Setns(int(nsf.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- fmt.Errorf("enter namespace %s: %w", ns.name, err)
			return
		}
		err = f()
		if unix.Setns(int(back.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

// dial connects to addr from inside the namespace.
func (ns *namespace) dial(ctx context.Context, network, addr string) (c net.Conn, err error) {
	err = ns.in(func() error {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// childAttr makes a node process die with the nemesis: the kernel kills
// it when the thread that started it ends, so nodes are started from
// spawner's thread, which never ends.
func childAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

var spawns = make(chan func())

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: this thread lives as long as the process
		for f := range spawns {
			f()
		}
	}()
}

// spawn starts cmd from a thread that never ends (see childAttr).
func spawn(cmd *exec.Cmd) error {
	done := make(chan error)
	spawns <- func() { done <- cmd.Start() }
	return <-done
}

// stopSignal and contSignal pause and wake a process.
var stopSignal, contSignal os.Signal = syscall.SIGSTOP, syscall.SIGCONT
