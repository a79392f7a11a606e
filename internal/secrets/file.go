package secrets

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tern-dev/tern/internal/atomicfile"
)

const (
	// fileExt ends the name of each encrypted file: NAME.secret.
	fileExt = ".secret"
	// checkName is the check file's name and additional data. It is no
	// secret name (they have no '-'), even on a case-insensitive disk.
	checkName = "password-check"
	// checkText is what the check file holds.
	checkText = "tern.secret/1 password check"
)

// files keeps each value encrypted in its own file of dir, NAME.secret
// (see seal.go). Besides them, the check file holds checkText encrypted
// with the folder's one password, so that a wrong password is refused
// before a secret is stored under it.
type files struct {
	dir    string
	prompt Prompt
	why    string // why the files: no keyring (and why), or TERN_SECRETS_BACKEND=file
	// password is the one that opened the folder, once one did; it is
	// not asked again.
	password string
	keys     map[kdfInput][]byte // derived keys, each derived once
}

func (b *files) path(name string) string { return filepath.Join(b.dir, name+fileExt) }

func (b *files) names() ([]string, error) {
	entries, err := os.ReadDir(b.dir)
	if errors.Is(err, os.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("could not list the secrets in %s: %w", b.dir, err)
	}
	names := []string{}
	for _, e := range entries {
		n, ok := strings.CutSuffix(e.Name(), fileExt)
		if c, err := CanonicalName(n); ok && e.Type().IsRegular() && err == nil && c == n {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

func (b *files) get(name string) (string, error) {
	path := b.path(name)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "", ErrNotFound // and no password is asked
	}
	if err != nil {
		return "", fmt.Errorf("could not read secret %s: %w", name, err)
	}
	if !b.hasPassword() {
		return "", unavailablef("secret %s is stored encrypted in %s, but %s: set it, in the environment of the process that needs the key (the 'tern node' that runs the agent, or this command), to the password the secret was stored with, or give the value in %s there",
			name, b.dir, passwordState(), EnvVar(name))
	}
	f, err := parseSealed(data)
	if err != nil {
		return "", fmt.Errorf("%s is not a secret file this tern can read (%v): remove it with 'tern secret rm %s' and set the secret again", path, err, name)
	}
	pw, err := b.ask(false)
	if err != nil {
		return "", err
	}
	plain, err := f.open(b.key(f, pw), name)
	if err != nil {
		if b.opensCheck(pw) {
			return "", unavailablef("%s does not open with the password of the other secrets in %s: it was altered, or copied from another secret's file. Remove it with 'tern secret rm %s' and set the secret again",
				path, b.dir, name)
		}
		return "", unavailablef("could not decrypt secret %s in %s: the password (%s, or the one typed) is not the one it was stored with",
			name, b.dir, PasswordEnv)
	}
	b.password = pw
	return string(plain), nil
}

func (b *files) set(name, value string) error {
	if !b.hasPassword() {
		return b.unavailable(name)
	}
	isNew, err := b.isNew()
	if err != nil {
		return err
	}
	pw, err := b.ask(isNew)
	if err != nil {
		return err
	}
	unlock, err := lockDir(b.dir)
	if err != nil {
		return err
	}
	defer unlock()
	like, key, err := b.folderKey(pw)
	if err != nil {
		return err
	}
	data, err := seal(key, like, name, []byte(value))
	if err != nil {
		return fmt.Errorf("could not encrypt secret %s: %w", name, err)
	}
	if err := writeFile(b.path(name), data); err != nil {
		return err
	}
	b.password = pw
	return nil
}

// remove deletes name's file; with the last one goes the check file, so
// that the empty folder takes a new password.
func (b *files) remove(name string) error {
	if _, err := os.Lstat(b.path(name)); errors.Is(err, os.ErrNotExist) {
		return ErrNotFound
	}
	unlock, err := lockDir(b.dir)
	if err != nil {
		return err
	}
	defer unlock()
	if err := os.Remove(b.path(name)); errors.Is(err, os.ErrNotExist) {
		return ErrNotFound
	} else if err != nil {
		return fmt.Errorf("could not remove secret %s: %w", name, err)
	}
	if names, err := b.names(); err == nil && len(names) == 0 {
		os.Remove(b.path(checkName))
		b.password = ""
	}
	return atomicfile.SyncDir(b.dir)
}

// isNew says whether the folder holds no secret and no check file.
func (b *files) isNew() (bool, error) {
	if _, err := os.Lstat(b.path(checkName)); !errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	names, err := b.names()
	return len(names) == 0, err
}

// folderKey checks, with the folder locked, that pw opens what the folder
// holds, and returns the salt and parameters that new files get, with
// their key. It writes the check file of a folder that has none.
func (b *files) folderKey(pw string) (*sealedFile, []byte, error) {
	check, err := b.readSealed(checkName)
	if err == nil {
		key := b.key(check, pw)
		if _, err := check.open(key, checkName); err != nil {
			return nil, nil, b.wrongPassword()
		}
		return check, key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, err
	}
	// No check file: pw must open a secret already there, if any.
	names, err := b.names()
	if err != nil {
		return nil, nil, err
	}
	if len(names) > 0 {
		f, err := b.readSealed(names[0])
		if err != nil {
			return nil, nil, err
		}
		if _, err := f.open(b.key(f, pw), names[0]); err != nil {
			return nil, nil, b.wrongPassword()
		}
	}
	like, err := newSealing()
	if err != nil {
		return nil, nil, err
	}
	key := b.key(like, pw)
	data, err := seal(key, like, checkName, []byte(checkText))
	if err != nil {
		return nil, nil, err
	}
	return like, key, writeFile(b.path(checkName), data)
}

// opensCheck says whether pw opens the check file.
func (b *files) opensCheck(pw string) bool {
	check, err := b.readSealed(checkName)
	if err != nil {
		return false
	}
	_, err = check.open(b.key(check, pw), checkName)
	return err == nil
}

// readSealed reads and parses the file of name (a secret, or checkName).
func (b *files) readSealed(name string) (*sealedFile, error) {
	path := b.path(name)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f, err := parseSealed(data)
	if err != nil {
		return nil, fmt.Errorf("%s is not a file this tern can read (%v): remove it", path, err)
	}
	return f, nil
}

// key is the key of f's salt and parameters for pw, derived once.
func (b *files) key(f *sealedFile, pw string) []byte {
	in := f.kdfInput(pw)
	k, ok := b.keys[in]
	if !ok {
		k = deriveKey(in)
		b.keys[in] = k
	}
	return k
}

// passwordState says why TERN_SECRETS_PASSWORD gave no password.
func passwordState() string {
	if _, set := os.LookupEnv(PasswordEnv); set {
		return PasswordEnv + " is set but empty"
	}
	return PasswordEnv + " is not set"
}

func (b *files) hasPassword() bool {
	return b.password != "" || os.Getenv(PasswordEnv) != "" || b.prompt != nil
}

// ask returns the password: TERN_SECRETS_PASSWORD, else the one that
// opened the folder already, else the prompt's answer, asked twice for a
// new folder.
func (b *files) ask(isNew bool) (string, error) {
	if p := os.Getenv(PasswordEnv); p != "" {
		return p, nil
	}
	if b.password != "" {
		return b.password, nil
	}
	if b.prompt == nil {
		return "", unavailablef("%s", passwordState())
	}
	if !isNew {
		p, err := b.prompt(fmt.Sprintf("Password of the secrets in %s (%s skips this question): ", b.dir, PasswordEnv))
		if err == nil && p == "" {
			err = fmt.Errorf("%w password: it is empty", ErrInvalid)
		}
		return p, err
	}
	why := b.why
	if why != BackendEnv+"=file" {
		why = "No OS keyring here"
	}
	p, err := b.prompt(fmt.Sprintf("%s: tern keeps secrets in %s, encrypted with a password.\nNew password (%s skips this question): ", why, b.dir, PasswordEnv))
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", fmt.Errorf("%w password: it is empty", ErrInvalid)
	}
	again, err := b.prompt("The same password again: ")
	if err != nil {
		return "", err
	}
	if again != p {
		return "", fmt.Errorf("%w password: the two differ; nothing was stored", ErrInvalid)
	}
	return p, nil
}

func (b *files) wrongPassword() error {
	return unavailablef("the password does not open the secrets already in %s: use the one they were stored with (%s, or type it); nothing was stored",
		b.dir, PasswordEnv)
}

// unavailable is the refusal to store name when there is nowhere to.
func (b *files) unavailable(name string) error {
	if b.why == BackendEnv+"=file" {
		return unavailablef("nowhere to store secret %s: %s is set and %s. Set %s to the password of %s (a long random one), or give the value in the environment variable %s instead of storing it",
			name, b.why, passwordState(), PasswordEnv, b.dir, EnvVar(name))
	}
	return unavailablef("nowhere to store secret %s: %s, and %s. Do one of these: install or start a keyring and unlock it; "+
		"or set %s to a long random password, to keep secrets encrypted in %s (tern needs it again to read them); "+
		"or, in a container or CI, give the value in the environment variable %s instead of storing it",
		name, b.why, passwordState(), PasswordEnv, b.dir, EnvVar(name))
}
