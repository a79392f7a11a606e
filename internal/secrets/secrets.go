// Package secrets keeps the values of the secrets agents need, such as
// model API keys, on this machine, by name. A capsule names a secret (the
// key_secret of agent.json); the value stays here and is never written into
// a capsule, a journal, a log line, an error message or an API answer.
//
// A Store keeps values in one backend, chosen by Open: the OS keyring
// (Secret Service on Linux, the macOS Keychain, Windows Credential Manager,
// service name "tern"), or, where none is reachable, the encrypted files
// of $TERN_HOME/secrets, whose password comes from TERN_SECRETS_PASSWORD or
// a prompt. Get also reads the environment variable TERN_SECRET_<NAME>,
// last, for containers and CI. docs/SECRETS.md describes it for people.
//
// No value ever appears in an error of this package.
package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/99designs/keyring"
)

// Environment variables and names this package reads and uses.
const (
	// BackendEnv forces a backend: "keyring", "file", or "auto" (the
	// default: the OS keyring when one is reachable, else the file).
	BackendEnv = "TERN_SECRETS_BACKEND"
	// PasswordEnv holds the password of the encrypted file backend.
	PasswordEnv = "TERN_SECRETS_PASSWORD"
	// EnvPrefix starts the environment variable that supplies a secret
	// when no backend holds it: TERN_SECRET_OPENAI_KEY for OPENAI_KEY.
	EnvPrefix = "TERN_SECRET_"
	// Dir is the file backend's folder in $TERN_HOME.
	Dir = "secrets"
	// ServiceName is the service (the collection on Secret Service) that
	// holds tern's secrets in the OS keyring.
	ServiceName = "tern"
)

var (
	// ErrNotFound means no backend and no environment variable holds the
	// secret. Its errors name the secret and how to set it.
	ErrNotFound = errors.New("not found")
	// ErrInvalid means bad input: a bad name, an empty value, a bad value
	// of TERN_SECRETS_BACKEND. Its errors say what a good one is.
	ErrInvalid = errors.New("invalid")
	// ErrUnavailable means there is nowhere to store a secret, or a stored
	// one cannot be opened: no OS keyring is reachable and the file
	// backend has no password. Its errors say what to do.
	ErrUnavailable = errors.New("no place to keep secrets")
)

// unavailableError is an error that wraps ErrUnavailable and says more.
type unavailableError struct{ msg string }

func (e *unavailableError) Error() string { return e.msg }
func (e *unavailableError) Unwrap() error { return ErrUnavailable }

func unavailablef(format string, args ...any) error {
	return &unavailableError{fmt.Sprintf(format, args...)}
}

// namePattern is what a secret name is, before it is upper-cased.
var namePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,63}$`)

// CanonicalName checks a secret name and returns the form it is stored,
// listed and looked up under: upper case. Names are case-insensitive, so
// openai_key and OPENAI_KEY are one secret. A name is 1 to 64 ASCII
// letters, digits and underscores, starting with a letter.
func CanonicalName(name string) (string, error) {
	if !namePattern.MatchString(name) {
		return "", fmt.Errorf("%w secret name %q: a name is 1 to 64 letters (A-Z, a-z), digits and _, starting with a letter, like OPENAI_KEY", ErrInvalid, name)
	}
	return strings.ToUpper(name), nil
}

// EnvVar is the environment variable that supplies the secret name when no
// backend holds it: TERN_SECRET_ and the name in upper case. It does not
// check the name.
func EnvVar(name string) string { return EnvPrefix + strings.ToUpper(name) }

// Prompt asks a person a question and returns what they type, without
// echo. Open's file backend uses it for its password; nil never asks.
type Prompt func(question string) (string, error)

// Store holds secrets by name in one backend. Its methods are safe for
// concurrent use.
type Store struct {
	mu     sync.Mutex
	ring   keyring.Keyring
	where  string // the backend, for people: "the macOS Keychain"
	dir    string // the file backend's folder; "" for the other backends
	prompt Prompt // asks for the file backend's password; nil never asks
	// noKeyring says why the file backend is used: the OS keyring is
	// unreachable, or TERN_SECRETS_BACKEND chose the file.
	noKeyring string
}

// osKeyrings are the OS keyrings Open tries, each with how people call it.
// The library offers each only on its own OS (the Keychain needs cgo).
var osKeyrings = []struct {
	backend keyring.BackendType
	where   string
}{
	{keyring.SecretServiceBackend, "the OS keyring (Secret Service)"},
	{keyring.KeychainBackend, "the macOS Keychain"},
	{keyring.WinCredBackend, "Windows Credential Manager"},
}

// Open opens this machine's store of secrets; home is $TERN_HOME. The
// backend is, by TERN_SECRETS_BACKEND:
//
//   - "" or "auto": the OS keyring when one is reachable, else the file;
//   - "keyring": the OS keyring, or an error when none is reachable;
//   - "file": the encrypted files in home/secrets.
//
// The file backend's password is TERN_SECRETS_PASSWORD, else what prompt
// returns (asked twice for a new store), asked only when a value is read
// or written. Without either, Open still succeeds: List and Remove work,
// Get falls back to the environment, and Set fails with ErrUnavailable and
// an error saying what to do.
func Open(home string, prompt Prompt) (*Store, error) {
	switch b := os.Getenv(BackendEnv); b {
	case "", "auto":
		if s := openKeyring(); s != nil {
			return s, nil
		}
		return openFile(home, prompt, noKeyringReason())
	case "keyring":
		if s := openKeyring(); s != nil {
			return s, nil
		}
		return nil, unavailablef("%s=keyring, but %s; start and unlock one, or set %s=file and %s to keep secrets encrypted in %s",
			BackendEnv, noKeyringReason(), BackendEnv, PasswordEnv, filepath.Join(home, Dir))
	case "file":
		return openFile(home, prompt, BackendEnv+"=file")
	default:
		return nil, fmt.Errorf("%w %s=%q: use keyring, file, or auto (the default: the OS keyring when one is reachable, else the encrypted file)", ErrInvalid, BackendEnv, b)
	}
}

// NewMemory returns a store that keeps secrets in this process's memory,
// for tests. Get still falls back to the environment.
func NewMemory() *Store {
	return &Store{ring: keyring.NewArrayKeyring(nil), where: "memory (this process only)"}
}

// openKeyring opens the OS keyring, nil when none is reachable.
func openKeyring() *Store {
	for _, k := range osKeyrings {
		ring, err := keyring.Open(keyring.Config{
			AllowedBackends:          []keyring.BackendType{k.backend},
			ServiceName:              ServiceName,
			KeychainTrustApplication: true,
		})
		if err == nil {
			return &Store{ring: ring, where: k.where}
		}
	}
	return nil
}

// noKeyringReason says, for a person on this OS, that no keyring is
// reachable and where tern looked for one.
func noKeyringReason() string {
	switch runtime.GOOS {
	case "darwin":
		return "the macOS Keychain is not available (this tern was built without cgo)"
	case "windows":
		return "Windows Credential Manager is not available"
	case "linux":
		return "no OS keyring is reachable (tern looks for the Secret Service, such as gnome-keyring or KeePassXC, on the D-Bus session bus)"
	}
	return "tern uses no OS keyring on " + runtime.GOOS
}

func openFile(home string, prompt Prompt, why string) (*Store, error) {
	if home == "" {
		return nil, errors.New("no folder for the encrypted secrets: set TERN_HOME")
	}
	dir := filepath.Join(home, Dir)
	s := &Store{where: "the encrypted files in " + dir, dir: dir, prompt: prompt, noKeyring: why}
	ring, err := keyring.Open(keyring.Config{
		AllowedBackends:  []keyring.BackendType{keyring.FileBackend},
		FileDir:          dir,
		FilePasswordFunc: s.filePassword,
	})
	if err != nil {
		return nil, fmt.Errorf("open the encrypted secrets in %s: %w", dir, err)
	}
	s.ring = ring
	return s, nil
}

// Backend says where the store keeps values, for people: "the OS keyring
// (Secret Service)", "the encrypted files in /home/me/.tern/secrets"…
func (s *Store) Backend() string { return s.where }

// Set stores value under name, replacing any value it had. An empty (or
// only white space) value is refused with ErrInvalid.
func (s *Store) Set(name, value string) error {
	name, err := CanonicalName(name)
	if err != nil {
		return err
	}
	if strings.TrimSpace(value) == "" {
		return fmt.Errorf("%w value for secret %s: it is empty", ErrInvalid, name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir != "" {
		if err := s.checkPassword(name); err != nil {
			return err
		}
	}
	err = s.ring.Set(keyring.Item{Key: name, Data: []byte(value), Label: "tern secret " + name,
		Description: "a secret of tern agents; tern secret rm " + name + " removes it"})
	if err != nil {
		return fmt.Errorf("could not store secret %s in %s: %w%s", name, s.where, err, s.advice())
	}
	return nil
}

// Get returns the value of the secret name: from the backend, or else
// from the environment variable EnvVar(name) when it is set and not empty.
// When neither has it, the error wraps ErrNotFound and says how to set it.
// When the backend fails (a locked keyring, a wrong or missing password)
// and the environment variable is not set, Get returns that failure.
func (s *Store) Get(name string) (string, error) {
	name, err := CanonicalName(name)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	v, err := s.lookup(name)
	s.mu.Unlock()
	if err == nil {
		return v, nil
	}
	if v := os.Getenv(EnvVar(name)); v != "" {
		return v, nil
	}
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("secret %s %w in %s nor in the environment variable %s: store it with 'tern secret set %s', or set %s in the environment of tern",
			name, ErrNotFound, s.where, EnvVar(name), name, EnvVar(name))
	}
	return "", err
}

// lookup reads name from the backend; a secret it lacks is ErrNotFound.
func (s *Store) lookup(name string) (string, error) {
	if s.dir != "" {
		if _, err := os.Lstat(filepath.Join(s.dir, name)); errors.Is(err, os.ErrNotExist) {
			return "", ErrNotFound // and no folder is created, no password asked
		}
		if s.prompt == nil && os.Getenv(PasswordEnv) == "" {
			return "", unavailablef("secret %s is stored encrypted in %s, but %s is not set: set it to the password the secret was stored with, or give the value in %s",
				name, s.dir, PasswordEnv, EnvVar(name))
		}
	}
	item, err := s.ring.Get(name)
	var pe *passwordError
	switch {
	case errors.Is(err, keyring.ErrKeyNotFound) || err == nil && len(item.Data) == 0:
		return "", ErrNotFound
	case errors.As(err, &pe):
		return "", fmt.Errorf("could not read secret %s in %s: %w", name, s.dir, pe.err)
	case err != nil && s.dir != "":
		return "", fmt.Errorf("could not decrypt secret %s in %s: is the password (%s, or the one typed) the one it was stored with? (%w)", name, s.dir, PasswordEnv, err)
	case err != nil:
		return "", fmt.Errorf("could not read secret %s from %s: %w", name, s.where, err)
	}
	return string(item.Data), nil
}

// List returns the names of the secrets the backend holds, sorted. It
// does not list secrets that only the environment supplies.
func (s *Store) List() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.names()
}

func (s *Store) names() ([]string, error) {
	names := []string{}
	if s.dir != "" {
		if _, err := os.Stat(s.dir); errors.Is(err, os.ErrNotExist) {
			return names, nil
		}
	}
	keys, err := s.ring.Keys()
	if err != nil {
		return nil, fmt.Errorf("could not list the secrets in %s: %w", s.where, err)
	}
	for _, k := range keys {
		if c, err := CanonicalName(k); err == nil && c == k { // not tern's otherwise
			names = append(names, k)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// Remove deletes the secret name from the backend. A secret the backend
// does not hold is an error wrapping ErrNotFound. The file backend needs
// no password to remove.
func (s *Store) Remove(name string) error {
	name, err := CanonicalName(name)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	names, err := s.names()
	if err != nil {
		return err
	}
	if !slices.Contains(names, name) {
		msg := ""
		if os.Getenv(EnvVar(name)) != "" {
			msg = fmt.Sprintf("; its value comes from the environment variable %s, which tern cannot remove", EnvVar(name))
		}
		return fmt.Errorf("secret %s %w in %s%s", name, ErrNotFound, s.where, msg)
	}
	if err := s.ring.Remove(name); err != nil {
		return fmt.Errorf("could not remove secret %s from %s: %w", name, s.where, err)
	}
	return nil
}

// checkPassword makes sure the file backend has a password before name is
// stored, and that it opens the secrets already stored, so that one store
// never holds secrets under two passwords.
func (s *Store) checkPassword(name string) error {
	if s.prompt == nil && os.Getenv(PasswordEnv) == "" {
		return s.unavailable(name)
	}
	names, err := s.names()
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return nil // a new store: the password is asked twice
	}
	_, err = s.ring.Get(names[0])
	var pe *passwordError
	switch {
	case err == nil || errors.Is(err, keyring.ErrKeyNotFound):
		return nil
	case errors.As(err, &pe):
		return pe.err
	}
	return fmt.Errorf("the password does not open the secrets already in %s (%v): use the password they were stored with; nothing was stored", s.dir, err)
}

// unavailable is the refusal to store name when there is nowhere to.
func (s *Store) unavailable(name string) error {
	if s.noKeyring == BackendEnv+"=file" {
		return unavailablef("nowhere to store secret %s: %s is set and %s is not. Set %s to the password of %s (a long random one), or give the value in the environment variable %s instead of storing it",
			name, s.noKeyring, PasswordEnv, PasswordEnv, s.dir, EnvVar(name))
	}
	return unavailablef("nowhere to store secret %s: %s, and %s is not set. Do one of these: install or start a keyring and unlock it; "+
		"or set %s to a long random password, to keep secrets encrypted in %s (tern needs it again to read them); "+
		"or, in a container or CI, give the value in the environment variable %s instead of storing it",
		name, s.noKeyring, PasswordEnv, PasswordEnv, s.dir, EnvVar(name))
}

// advice follows a failure to store in the backend.
func (s *Store) advice() string {
	if s.dir != "" {
		return ""
	}
	return fmt.Sprintf("; unlock the keyring and try again, or set %s=file and %s to keep secrets in tern's encrypted files instead", BackendEnv, PasswordEnv)
}

// passwordError is a failure to get the file backend's password (rather
// than a password that does not decrypt).
type passwordError struct{ err error }

func (e *passwordError) Error() string { return e.err.Error() }
func (e *passwordError) Unwrap() error { return e.err }

// filePassword is the file backend's password: TERN_SECRETS_PASSWORD, else
// asked through the prompt, twice for a store that holds nothing yet.
// The library calls it with s.mu held, once it needs the password.
func (s *Store) filePassword(string) (string, error) {
	p, err := s.askPassword()
	if err != nil {
		return "", &passwordError{err}
	}
	return p, nil
}

func (s *Store) askPassword() (string, error) {
	if p := os.Getenv(PasswordEnv); p != "" {
		return p, nil
	}
	if s.prompt == nil {
		return "", unavailablef("%s is not set", PasswordEnv)
	}
	if names, _ := s.names(); len(names) > 0 {
		p, err := s.prompt(fmt.Sprintf("Password of the secrets in %s (%s skips this question): ", s.dir, PasswordEnv))
		if err == nil && p == "" {
			err = fmt.Errorf("%w password: it is empty", ErrInvalid)
		}
		return p, err
	}
	why := s.noKeyring
	if why != BackendEnv+"=file" {
		why = "No OS keyring here"
	}
	p, err := s.prompt(fmt.Sprintf("%s: tern keeps secrets in %s, encrypted with a password.\nNew password (%s skips this question): ", why, s.dir, PasswordEnv))
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", fmt.Errorf("%w password: it is empty", ErrInvalid)
	}
	again, err := s.prompt("The same password again: ")
	if err != nil {
		return "", err
	}
	if again != p {
		return "", fmt.Errorf("%w password: the two differ; nothing was stored", ErrInvalid)
	}
	return p, nil
}
