//go:build !((dragonfly && cgo) || (freebsd && cgo) || linux || netbsd || openbsd)

package secrets

import (
	"errors"
	"os"
	"runtime"
)

// keyringReachable says whether this OS has a keyring tern can use: the
// macOS Keychain (through /usr/bin/security) or Windows Credential
// Manager. Neither involves D-Bus.
func keyringReachable() (string, error) {
	switch runtime.GOOS {
	case "darwin":
		if _, err := os.Stat("/usr/bin/security"); err != nil {
			return "", errors.New("the macOS Keychain is not reachable: /usr/bin/security is missing")
		}
		return "the macOS Keychain", nil
	case "windows":
		return "Windows Credential Manager", nil
	}
	return "", errors.New("tern uses no OS keyring on " + runtime.GOOS)
}
