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
// Nothing in this package runs at start-up: linking it connects to no
// D-Bus, and the OS keyring is looked for only when a Store first needs
// it. No value ever appears in an error of this package.
package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
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
	// Dir is the folder in $TERN_HOME of the encrypted files and of the
	// index of the names kept in the OS keyring.
	Dir = "secrets"
	// ServiceName is the service that tern's secrets have in the OS
	// keyring; a secret's canonical name is its user (account).
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
	// backend has no password, or the password is wrong. Its errors say
	// what to do.
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

// backend is where a Store keeps values. Names are canonical. get and
// remove return an error wrapping ErrNotFound for a secret the backend
// does not hold; every other error is complete, for people.
type backend interface {
	get(name string) (string, error)
	set(name, value string) error
	remove(name string) error
	names() ([]string, error) // sorted, never nil
}

// Store holds secrets by name in one backend. Its methods are safe for
// concurrent use.
type Store struct {
	mu     sync.Mutex
	b      backend // nil until first use when the backend is "auto"
	where  string  // the backend, for people: "the macOS Keychain"
	dir    string  // home/secrets
	prompt Prompt
}

// probeKeyring says whether the OS keyring is reachable: how people call
// it, or why it is not reachable. Tests replace it.
var probeKeyring = keyringReachable

// Open opens this machine's store of secrets; home is $TERN_HOME, which
// must be set. The backend is, by TERN_SECRETS_BACKEND:
//
//   - "" or "auto": the OS keyring when one is reachable, else the file;
//     Open touches neither: the keyring is looked for (within a few
//     seconds, never starting a D-Bus session bus) when a method of the
//     Store first needs it;
//   - "keyring": the OS keyring; Open fails with ErrUnavailable when
//     none is reachable;
//   - "file": the encrypted files in home/secrets.
//
// The names (never the values) of the secrets in the OS keyring are kept
// in home/secrets/names.json, for List.
//
// The file backend's password is TERN_SECRETS_PASSWORD, else what prompt
// returns (asked twice for a new folder), asked only when a value is read
// or written. Without either, List and Remove work, Get falls back to the
// environment, and Set fails with ErrUnavailable and an error saying what
// to do.
func Open(home string, prompt Prompt) (*Store, error) {
	b := os.Getenv(BackendEnv)
	if b != "" && b != "auto" && b != "keyring" && b != "file" {
		return nil, fmt.Errorf("%w %s=%q: use keyring, file, or auto (the default: the OS keyring when one is reachable, else the encrypted file)", ErrInvalid, BackendEnv, b)
	}
	if home == "" {
		return nil, errors.New("no folder for tern's secrets: set TERN_HOME")
	}
	dir, err := filepath.Abs(filepath.Join(home, Dir)) // errors name the full path, whoever reads them
	if err != nil {
		return nil, err
	}
	s := &Store{dir: dir, prompt: prompt}
	switch b {
	case "keyring":
		where, err := probeKeyring()
		if err != nil {
			return nil, unavailablef("%s=keyring, but no OS keyring is reachable: %v. Start and unlock one, or set %s=file and %s to keep secrets encrypted in %s",
				BackendEnv, err, BackendEnv, PasswordEnv, s.dir)
		}
		s.useKeyring(where)
	case "file":
		s.useFile(BackendEnv + "=file")
	}
	return s, nil
}

// NewMemory returns a store that keeps secrets in this process's memory,
// for tests. Get still falls back to the environment.
func NewMemory() *Store {
	return &Store{b: &memory{values: map[string]string{}}, where: "memory (this process only)"}
}

func (s *Store) useKeyring(where string) {
	s.b, s.where = &osKeyring{where: where, index: filepath.Join(s.dir, indexFile)}, where
}

// useFile chooses the encrypted files; why says why (no keyring, or
// TERN_SECRETS_BACKEND=file), for the errors that need a password.
func (s *Store) useFile(why string) {
	s.b = &files{dir: s.dir, prompt: s.prompt, why: why, keys: map[kdfInput][]byte{}}
	s.where = "the encrypted files in " + s.dir
}

// backend is the store's backend, chosen now if it was not yet. The
// caller holds s.mu.
func (s *Store) backend() backend {
	if s.b == nil {
		if where, err := probeKeyring(); err == nil {
			s.useKeyring(where)
		} else {
			s.useFile(fmt.Sprintf("no OS keyring is reachable (%v)", err))
		}
	}
	return s.b
}

// Backend says where the store keeps values, for people: "the OS keyring
// (Secret Service)", "the encrypted files in /home/me/.tern/secrets"…
// It chooses the backend if no method did yet.
func (s *Store) Backend() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backend()
	return s.where
}

// Set stores value under name, replacing any value it had. An empty (or
// only white space) value, or one holding a line break or another control
// character, is refused with ErrInvalid: a key or a token is one line, and
// a value that cannot go into an HTTP header would only fail later, at the
// first model call, far from its cause.
func (s *Store) Set(name, value string) error {
	name, err := CanonicalName(name)
	if err != nil {
		return err
	}
	if strings.TrimSpace(value) == "" {
		return fmt.Errorf("%w value for secret %s: it is empty", ErrInvalid, name)
	}
	if i := strings.IndexFunc(value, isControl); i >= 0 {
		return fmt.Errorf("%w value for secret %s: it holds a line break or control character (byte %d of %d); a key or token is one line, so give only that line",
			ErrInvalid, name, i+1, len(value))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backend().set(name, value)
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
	v, err := s.backend().get(name)
	where := s.where
	s.mu.Unlock()
	if err == nil {
		return v, nil
	}
	if v := os.Getenv(EnvVar(name)); v != "" {
		return v, nil
	}
	if errors.Is(err, ErrNotFound) {
		return "", fmt.Errorf("secret %s %w in %s nor in the environment variable %s: store it with 'tern secret set %s', or set %s in the environment of tern",
			name, ErrNotFound, where, EnvVar(name), name, EnvVar(name))
	}
	return "", err
}

// List returns the names of the secrets the backend holds, sorted. It
// does not list secrets that only the environment supplies. For the OS
// keyring it reads the index of names in $TERN_HOME/secrets.
func (s *Store) List() ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.backend().names()
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
	err = s.backend().remove(name)
	if errors.Is(err, ErrNotFound) {
		msg := ""
		if os.Getenv(EnvVar(name)) != "" {
			msg = fmt.Sprintf("; its value comes from the environment variable %s, which tern cannot remove", EnvVar(name))
		}
		return fmt.Errorf("secret %s %w in %s%s", name, ErrNotFound, s.where, msg)
	}
	return err
}

// memory is NewMemory's backend.
type memory struct{ values map[string]string }

func (m *memory) get(name string) (string, error) {
	if v, ok := m.values[name]; ok {
		return v, nil
	}
	return "", ErrNotFound
}

func (m *memory) set(name, value string) error { m.values[name] = value; return nil }

func (m *memory) remove(name string) error {
	if _, ok := m.values[name]; !ok {
		return ErrNotFound
	}
	delete(m.values, name)
	return nil
}

func (m *memory) names() ([]string, error) {
	names := []string{}
	for n := range m.values {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, nil
}

// isControl reports an ASCII control character: a value holding one
// cannot be sent in an HTTP header.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
