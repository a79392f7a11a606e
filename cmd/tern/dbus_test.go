package main

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// No package init in tern's dependency graph may reach for D-Bus: a tern
// process that does not use the OS keyring connects to no session bus and
// never runs dbus-launch (which would leave a dbus-daemon behind). The
// test binary links every package tern does, and more; it runs here as the
// tern command (see TestMain).
func TestNoDBusAtStartUp(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no D-Bus on Windows")
	}
	dir := t.TempDir()
	bus := listenBus(t, filepath.Join(dir, "bus"))

	// A dbus-launch that leaves a mark, first on PATH.
	bin := filepath.Join(dir, "bin")
	marker := filepath.Join(dir, "dbus-launch-ran")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho ran >> '" + marker + "'\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bin, "dbus-launch"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	noBus := t.TempDir() // an $XDG_RUNTIME_DIR without a bus socket

	home := t.TempDir()
	for _, c := range []struct {
		what string
		env  []string
		args []string
	}{
		{"a session bus", []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + bus.path}, []string{"--help"}},
		{"a session bus, the file backend", []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + bus.path, "TERN_SECRETS_BACKEND=file"}, []string{"secret", "list"}},
		{"no session bus", []string{"XDG_RUNTIME_DIR=" + noBus, "PATH=" + bin}, []string{"--help"}},
		// The OS keyring is looked for on first use, and without a bus
		// that finds none without launching one.
		{"no session bus, the auto backend", []string{"XDG_RUNTIME_DIR=" + noBus, "PATH=" + bin}, []string{"secret", "list"}},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, os.Args[0], c.args...)
		cmd.Env = append(envWithout("DBUS_SESSION_BUS_ADDRESS", "XDG_RUNTIME_DIR", "PATH", "TERN_SECRETS_BACKEND", "TERN_SECRETS_PASSWORD"),
			append(c.env, "TERN_TEST_AS_CLI=1", "TERN_HOME="+home)...)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: tern %s: %v\n%s", c.what, strings.Join(c.args, " "), err, out)
		}
	}
	if n := bus.close(); n != 0 {
		t.Errorf("tern connected to the session bus %d times without using the OS keyring", n)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("tern ran dbus-launch (%v)", err)
	}
}

// fakeBus is a unix socket that counts the connections made to it and
// closes each at once.
type fakeBus struct {
	path  string
	stop  atomic.Bool
	done  chan struct{}
	count atomic.Int32
}

func listenBus(t *testing.T, path string) *fakeBus {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	b := &fakeBus{path: path, done: make(chan struct{})}
	go func() {
		defer close(b.done)
		defer l.Close()
		ul := l.(*net.UnixListener)
		for {
			ul.SetDeadline(time.Now().Add(20 * time.Millisecond))
			c, err := ul.Accept()
			if err == nil {
				b.count.Add(1)
				c.Close()
				continue
			}
			if b.stop.Load() { // and no connection is waiting
				return
			}
		}
	}()
	t.Cleanup(func() { b.close() })
	return b
}

// close stops listening, once every waiting connection is counted, and
// returns the count.
func (b *fakeBus) close() int {
	b.stop.Store(true)
	<-b.done
	return int(b.count.Load())
}

// envWithout is this process's environment less the named variables.
func envWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); !slices.Contains(names, k) {
			env = append(env, kv)
		}
	}
	return env
}
