//go:build (dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd

package secrets

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	dbus "github.com/godbus/dbus/v5"
)

// On these systems the OS keyring is the Secret Service on the D-Bus
// session bus (the build constraint is go-keyring's).

const busEnv = "DBUS_SESSION_BUS_ADDRESS"

// probeTimeout bounds the look for the Secret Service.
var probeTimeout = 3 * time.Second

// runUserDir is where systemd puts the user's session bus, which the D-Bus
// library looks for besides $XDG_RUNTIME_DIR. Tests replace it.
var runUserDir = fmt.Sprintf("/run/user/%d", os.Getuid())

// keyringReachable says whether a Secret Service answers on the session
// bus, within probeTimeout. It never makes anything start a bus: without
// DBUS_SESSION_BUS_ADDRESS nor a bus socket in $XDG_RUNTIME_DIR (or
// /run/user/UID) it answers no without calling D-Bus, since the D-Bus
// library would run dbus-launch. When it finds the socket itself, it sets
// DBUS_SESSION_BUS_ADDRESS to it, so that the keyring's calls use it too.
func keyringReachable() (string, error) {
	addr, err := sessionBus()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	conn, err := dbus.Connect(addr, dbus.WithContext(ctx))
	if err != nil {
		return "", fmt.Errorf("could not connect to the D-Bus session bus %q: %v", addr, late(ctx, err))
	}
	defer conn.Close()
	err = conn.Object("org.freedesktop.secrets", "/org/freedesktop/secrets").
		CallWithContext(ctx, "org.freedesktop.DBus.Peer.Ping", 0).Err
	if err != nil {
		return "", fmt.Errorf("no Secret Service (such as gnome-keyring or KeePassXC) answers on the D-Bus session bus: %v", late(ctx, err))
	}
	return "the OS keyring (Secret Service)", nil
}

// late is err, or that no answer came in time when ctx ran out.
func late(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("no answer within %v", probeTimeout)
	}
	return err
}

// sessionBus is the address of the session bus, if one is there.
func sessionBus() (string, error) {
	if a := os.Getenv(busEnv); a != "" && a != "autolaunch:" {
		return a, nil
	}
	for _, dir := range []string{os.Getenv("XDG_RUNTIME_DIR"), runUserDir} {
		if dir == "" {
			continue
		}
		sock := filepath.Join(dir, "bus")
		if st, err := os.Stat(sock); err == nil && st.Mode().Type() == fs.ModeSocket {
			addr := "unix:path=" + dbus.EscapeBusAddressValue(sock)
			os.Setenv(busEnv, addr)
			return addr, nil
		}
	}
	return "", fmt.Errorf("no D-Bus session bus: %s is not set and there is no $XDG_RUNTIME_DIR/bus; tern never starts one", busEnv)
}
