//go:build linux

package secrets

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dbus "github.com/godbus/dbus/v5"
)

// noBusHere makes the test's session bus only what it sets up: no
// DBUS_SESSION_BUS_ADDRESS, an empty $XDG_RUNTIME_DIR and /run/user/UID,
// and a dbus-launch first on PATH that leaves a mark; it returns the
// runtime folder and the mark's path.
func noBusHere(t *testing.T) (string, string) {
	t.Helper()
	t.Setenv(busEnv, "")
	os.Unsetenv(busEnv)
	run := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", run)
	swap(t, &runUserDir, run)
	bin, marker := t.TempDir(), filepath.Join(t.TempDir(), "ran")
	os.WriteFile(filepath.Join(bin, "dbus-launch"), []byte("#!/bin/sh\necho ran > '"+marker+"'\nexit 1\n"), 0o755)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return run, marker
}

func TestNoSessionBusIsNoKeyringAndLaunchesNone(t *testing.T) {
	_, marker := noBusHere(t)
	_, err := keyringReachable()
	if err == nil || !strings.Contains(err.Error(), "no D-Bus session bus") {
		t.Fatalf("keyringReachable: %v", err)
	}
	for _, a := range []string{"autolaunch:"} { // the D-Bus library would launch one
		t.Setenv(busEnv, a)
		if _, err := keyringReachable(); err == nil || !strings.Contains(err.Error(), "no D-Bus session bus") {
			t.Fatalf("with %s=%s: %v", busEnv, a, err)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("dbus-launch ran")
	}
}

func TestASilentBusIsNoKeyringWithinTheTimeout(t *testing.T) {
	run, _ := noBusHere(t)
	swap(t, &probeTimeout, 200*time.Millisecond)
	l, err := net.Listen("unix", filepath.Join(run, "bus"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() { // accepts, and never answers
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	_, err = keyringReachable()
	if err == nil || time.Since(start) > 3*time.Second {
		t.Fatalf("keyringReachable: %v after %v", err, time.Since(start))
	}
	if got := os.Getenv(busEnv); got != "unix:path="+filepath.Join(run, "bus") {
		t.Fatalf("%s = %q, want the socket found", busEnv, got)
	}
}

// A real session bus: without a Secret Service on it, no keyring, said
// plainly and quickly; with one, the keyring.
func TestTheSecretServiceOnARealBus(t *testing.T) {
	daemon, err := exec.LookPath("dbus-daemon")
	if err != nil {
		t.Skip("no dbus-daemon here")
	}
	noBusHere(t)
	dir := t.TempDir()
	addr := "unix:path=" + filepath.Join(dir, "bus")
	// A session bus that activates no service, whatever this machine has.
	config := filepath.Join(dir, "bus.conf")
	os.WriteFile(config, []byte(`<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig><type>session</type><listen>`+addr+`</listen><auth>EXTERNAL</auth>
<policy context="default"><allow send_destination="*" eavesdrop="true"/><allow eavesdrop="true"/><allow own="*"/></policy></busconfig>
`), 0o600)
	cmd := exec.Command(daemon, "--config-file="+config, "--nofork", "--nopidfile", "--print-address")
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Skipf("dbus-daemon does not start: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Skipf("dbus-daemon printed no address: %v", err)
	}
	t.Setenv(busEnv, addr)
	start := time.Now()
	_, err = keyringReachable()
	if err == nil || !strings.Contains(err.Error(), "no Secret Service") || time.Since(start) > 5*time.Second {
		t.Fatalf("keyringReachable: %v after %v", err, time.Since(start))
	}

	// A stand-in that owns the name; the D-Bus library answers pings.
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if r, err := conn.RequestName("org.freedesktop.secrets", 0); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("RequestName: %v, %v", r, err)
	}
	if where, err := keyringReachable(); err != nil || where != "the OS keyring (Secret Service)" {
		t.Fatalf("keyringReachable = %q, %v", where, err)
	}
}
