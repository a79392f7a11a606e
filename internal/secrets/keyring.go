package secrets

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/zalando/go-keyring"
)

// indexFile, in $TERN_HOME/secrets, lists the names (never the values) of
// the secrets in the OS keyring, which has no way to list them.
const indexFile = "names.json"

// indexFormat names the format of indexFile.
const indexFormat = "tern.secret-names/1"

// keyringTimeout bounds one call to the OS keyring, which may wait for a
// person to unlock it. A call that takes longer fails; it is left to end
// on its own.
var keyringTimeout = 2 * time.Minute

// osKeyring keeps values in the OS keyring (service ServiceName, user the
// canonical name) and their names in the index.
type osKeyring struct {
	where string // for people: "the macOS Keychain"
	index string // path of indexFile
}

func (k *osKeyring) get(name string) (string, error) {
	v, err := callKeyring(func() (string, error) { return keyring.Get(ServiceName, name) })
	switch {
	case errors.Is(err, keyring.ErrNotFound):
		return "", ErrNotFound
	case err != nil:
		return "", fmt.Errorf("could not read secret %s from %s: %v%s", name, k.where, err, k.advice())
	}
	return v, nil
}

func (k *osKeyring) set(name, value string) error {
	_, err := callKeyring(func() (struct{}, error) { return struct{}{}, keyring.Set(ServiceName, name, value) })
	if errors.Is(err, keyring.ErrSetDataTooBig) {
		return fmt.Errorf("%w value for secret %s: it is too large for %s; set %s=file to keep it in tern's encrypted files", ErrInvalid, name, k.where, BackendEnv)
	}
	if err != nil {
		return fmt.Errorf("could not store secret %s in %s: %v%s", name, k.where, err, k.advice())
	}
	if err := k.update(name, true); err != nil {
		return fmt.Errorf("stored secret %s in %s, but 'tern secret list' will not show it: %w; set it again to list it", name, k.where, err)
	}
	return nil
}

// remove deletes name from the keyring and the index. A name that the
// index lists but the keyring lacks (removed by another program) leaves
// the index and is ErrNotFound.
func (k *osKeyring) remove(name string) error {
	_, err := callKeyring(func() (struct{}, error) { return struct{}{}, keyring.Delete(ServiceName, name) })
	if err != nil && !errors.Is(err, keyring.ErrNotFound) {
		return fmt.Errorf("could not remove secret %s from %s: %v%s", name, k.where, err, k.advice())
	}
	if uerr := k.update(name, false); uerr != nil {
		return fmt.Errorf("removed secret %s from %s, but 'tern secret list' still shows it: %w", name, k.where, uerr)
	}
	if err != nil {
		return ErrNotFound
	}
	return nil
}

func (k *osKeyring) names() ([]string, error) { return readIndex(k.index) }

func (k *osKeyring) advice() string {
	return fmt.Sprintf("; unlock the keyring and try again, or set %s=file and %s to keep secrets in tern's encrypted files instead", BackendEnv, PasswordEnv)
}

// update adds name to the index, or drops it, under the folder's lock.
func (k *osKeyring) update(name string, add bool) error {
	dir := filepath.Dir(k.index)
	if !add {
		if _, err := os.Stat(k.index); errors.Is(err, os.ErrNotExist) {
			return nil
		}
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	names, err := readIndex(k.index)
	if err != nil {
		return err
	}
	i, found := slices.BinarySearch(names, name)
	switch {
	case add && !found:
		names = slices.Insert(names, i, name)
	case !add && found:
		names = slices.Delete(names, i, i+1)
	default:
		return nil
	}
	data, err := json.Marshal(index{Format: indexFormat, Names: names})
	if err != nil {
		return err
	}
	return writeFile(k.index, append(data, '\n'))
}

// index is the content of indexFile.
type index struct {
	Format string   `json:"format"`
	Names  []string `json:"names"`
}

// readIndex returns the sorted names in the index at path; none when it
// does not exist.
func readIndex(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return []string{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("could not read the names of the secrets in the OS keyring: %w", err)
	}
	var ix index
	if err := json.Unmarshal(data, &ix); err != nil || ix.Format != indexFormat {
		return nil, fmt.Errorf("%s is not an index of secret names (%s): remove it (the secrets stay in the OS keyring) and set each again to list it", path, indexFormat)
	}
	names := []string{}
	for _, n := range ix.Names {
		if c, err := CanonicalName(n); err == nil && c == n {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

// callKeyring calls the OS keyring through f, for at most keyringTimeout.
func callKeyring[T any](f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(keyringTimeout):
		var zero T
		return zero, fmt.Errorf("no answer within %v (is it waiting to be unlocked?)", keyringTimeout)
	}
}
