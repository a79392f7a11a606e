package secrets

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// value is the secret the tests store; no error and no file may show it.
const value = "sk-test-4f9a1c0b7e2d"

// clean makes the test independent of the environment it runs in: no
// secret, password or backend choice comes from outside, and no OS keyring
// is reachable. Files are sealed with a cheap key derivation.
func clean(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, EnvPrefix) || k == PasswordEnv || k == BackendEnv {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	swap(t, &probeKeyring, func() (string, error) { return "", errors.New("no keyring in this test") })
	swap(t, &newKDF, kdfParams{T: 1, M: 64, P: 1})
}

// swap sets *v to x for the test.
func swap[T any](t *testing.T, v *T, x T) {
	old := *v
	*v = x
	t.Cleanup(func() { *v = old })
}

// fileStore opens the encrypted file backend in a new home, with password
// pw in the environment ("" for none) and no prompt.
func fileStore(t *testing.T, home, pw string) *Store {
	t.Helper()
	t.Setenv(BackendEnv, "file")
	t.Setenv(PasswordEnv, pw)
	s, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// noValue fails the test if err shows the secret's value.
func noValue(t *testing.T, err error) {
	t.Helper()
	if err != nil && strings.Contains(err.Error(), value) {
		t.Fatalf("an error shows the value: %v", err)
	}
}

func roundTrip(t *testing.T, s *Store) {
	t.Helper()
	if got, err := s.List(); err != nil || len(got) != 0 || got == nil {
		t.Fatalf("a new store lists %#v, %v; want an empty list", got, err)
	}
	for _, n := range []string{"openai_key", "ANTHROPIC_KEY", "Gemini"} {
		if err := s.Set(n, value+n); err != nil {
			t.Fatalf("Set(%s): %v", n, err)
		}
	}
	if err := s.Set("OpenAI_Key", value); err != nil { // names are case-insensitive: this replaces it
		t.Fatal(err)
	}
	got, err := s.List()
	if want := []string{"ANTHROPIC_KEY", "GEMINI", "OPENAI_KEY"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("List = %v, %v; want %v", got, err, want)
	}
	if v, err := s.Get("OPENAI_KEY"); err != nil || v != value {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if v, err := s.Get("gemini"); err != nil || v != value+"Gemini" {
		t.Fatalf("Get(gemini) = %q, %v", v, err)
	}
	if err := s.Remove("openai_key"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get("OPENAI_KEY")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after Remove: %v, want ErrNotFound", err)
	}
	noValue(t, err)
	err = s.Remove("OPENAI_KEY")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "OPENAI_KEY") {
		t.Fatalf("Remove of a removed secret: %v, want ErrNotFound naming it", err)
	}
	if got, _ := s.List(); !slices.Equal(got, []string{"ANTHROPIC_KEY", "GEMINI"}) {
		t.Fatalf("List after Remove = %v", got)
	}
}

func TestMemoryRoundTrip(t *testing.T) {
	clean(t)
	roundTrip(t, NewMemory())
}

func TestFileRoundTripKeepsNoValueInPlainText(t *testing.T) {
	clean(t)
	home := t.TempDir()
	s := fileStore(t, home, "correct horse battery staple")
	if want := "the encrypted files in " + filepath.Join(home, Dir); s.Backend() != want {
		t.Fatalf("Backend = %q, want %q", s.Backend(), want)
	}
	roundTrip(t, s)
	if err := s.Set("OPENAI_KEY", value); err != nil {
		t.Fatal(err)
	}
	// Another process (another Store) reads it with the same password.
	again := fileStore(t, home, "correct horse battery staple")
	if v, err := again.Get("openai_key"); err != nil || v != value {
		t.Fatalf("a second store reads %q, %v", v, err)
	}
	forms := [][]byte{[]byte(value), []byte(base64.StdEncoding.EncodeToString([]byte(value))),
		[]byte(base64.RawURLEncoding.EncodeToString([]byte(value))), []byte("correct horse")}
	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if d.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(path)
		for _, f := range forms {
			if bytes.Contains(b, f) {
				t.Errorf("%s holds %q in plain text", path, f)
			}
		}
		if info, _ := d.Info(); info.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s has mode %v; others may read it", path, info.Mode())
		}
		return nil
	})
}

func TestFileWithAWrongPasswordReadsNothingAndStoresNothing(t *testing.T) {
	clean(t)
	home := t.TempDir()
	if err := fileStore(t, home, "right").Set("OPENAI_KEY", value); err != nil {
		t.Fatal(err)
	}
	wrong := fileStore(t, home, "wrong")
	_, err := wrong.Get("OPENAI_KEY")
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "password") {
		t.Fatalf("Get with a wrong password: %v", err)
	}
	noValue(t, err)
	err = wrong.Set("OTHER", value)
	if err == nil || !strings.Contains(err.Error(), "does not open the secrets already in") {
		t.Fatalf("Set with a wrong password: %v", err)
	}
	noValue(t, err)
	if names, _ := wrong.List(); !slices.Equal(names, []string{"OPENAI_KEY"}) {
		t.Fatalf("a refused Set stored something: %v", names)
	}
	// The environment variable still supplies what the store cannot open.
	t.Setenv("TERN_SECRET_OPENAI_KEY", "from-env")
	if v, err := wrong.Get("OPENAI_KEY"); err != nil || v != "from-env" {
		t.Fatalf("Get = %q, %v; want the environment's value", v, err)
	}
}

func TestFileWithoutPasswordSaysWhatToDo(t *testing.T) {
	clean(t)
	home := t.TempDir()
	t.Setenv(PasswordEnv, "")
	s, err := Open(home, nil) // auto, on a machine without a keyring
	if err != nil {
		t.Fatal(err)
	}
	err = s.Set("openai_key", value)
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Set without keyring or password: %v, want ErrUnavailable", err)
	}
	noValue(t, err)
	for _, want := range []string{"OPENAI_KEY", "keyring", "TERN_SECRETS_PASSWORD", filepath.Join(home, Dir), "TERN_SECRET_OPENAI_KEY"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if _, err := os.Stat(filepath.Join(home, Dir)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused Set created %s", Dir)
	}
	if names, err := s.List(); err != nil || len(names) != 0 {
		t.Fatalf("List = %v, %v", names, err)
	}
	t.Setenv("TERN_SECRET_OPENAI_KEY", value)
	if v, err := s.Get("openai_key"); err != nil || v != value {
		t.Fatalf("Get from the environment = %q, %v", v, err)
	}

	// Forced to the file, it says so instead of asking for a keyring.
	s = fileStore(t, home, "")
	err = s.Set("X", value)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "TERN_SECRETS_BACKEND=file") {
		t.Fatalf("Set forced to the file without password: %v", err)
	}
}

func TestFileStoredSecretWithoutPasswordIsUnavailable(t *testing.T) {
	clean(t)
	home := t.TempDir()
	if err := fileStore(t, home, "pw").Set("KEY", value); err != nil {
		t.Fatal(err)
	}
	s := fileStore(t, home, "")
	_, err := s.Get("KEY")
	for _, want := range []string{"TERN_SECRETS_PASSWORD is set but empty", "tern node", filepath.Join(home, Dir)} {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), want) {
			t.Fatalf("Get with an empty password: %v, want it to say %q", err, want)
		}
	}
	noValue(t, err)
	os.Unsetenv(PasswordEnv)
	if _, err := s.Get("KEY"); err == nil || !strings.Contains(err.Error(), "TERN_SECRETS_PASSWORD is not set") {
		t.Fatalf("Get without password: %v", err)
	}
	if err := s.Remove("KEY"); err != nil {
		t.Fatalf("Remove needs no password: %v", err)
	}
}

func TestFilePasswordFromThePrompt(t *testing.T) {
	clean(t)
	home := t.TempDir()
	t.Setenv(BackendEnv, "file")
	var asked []string
	answers := []string{"pw", "pw"}
	prompt := func(q string) (string, error) {
		asked = append(asked, q)
		a := answers[0]
		answers = answers[1:]
		return a, nil
	}
	s, err := Open(home, prompt)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Set("KEY", value); err != nil {
		t.Fatal(err)
	}
	if len(asked) != 2 || !strings.Contains(asked[0], "New password") {
		t.Fatalf("a new store asked %q, want a new password twice", asked)
	}
	if err := s.Set("KEY2", value); err != nil || len(asked) != 2 {
		t.Fatalf("the password was asked again (%v, %d questions)", err, len(asked))
	}

	// An existing store asks once, and a typo is refused.
	asked, answers = nil, []string{"typo"}
	s, _ = Open(home, prompt)
	err = s.Set("KEY3", value)
	if len(asked) != 1 || err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("asked %q, Set: %v", asked, err)
	}

	// A new store refuses two different passwords.
	home2 := t.TempDir()
	asked, answers = nil, []string{"one", "two"}
	s, _ = Open(home2, prompt)
	err = s.Set("KEY", value)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "differ") {
		t.Fatalf("two different passwords: %v", err)
	}
	if names, _ := s.List(); len(names) != 0 {
		t.Fatalf("stored %v", names)
	}
}

func TestEnvironmentIsTheLastSource(t *testing.T) {
	clean(t)
	s := NewMemory()
	t.Setenv("TERN_SECRET_OPENAI_KEY", "from-env")
	if v, err := s.Get("openai_key"); err != nil || v != "from-env" {
		t.Fatalf("Get = %q, %v", v, err)
	}
	if err := s.Set("OPENAI_KEY", value); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Get("OPENAI_KEY"); v != value {
		t.Fatalf("Get = %q; the stored value comes first", v)
	}
	if names, _ := s.List(); !slices.Equal(names, []string{"OPENAI_KEY"}) {
		t.Fatalf("List = %v", names)
	}
	t.Setenv("TERN_SECRET_EMPTY", "")
	if _, err := s.Get("EMPTY"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("an empty variable supplies nothing: %v", err)
	}
	t.Setenv("TERN_SECRET_ONLYENV", "x")
	if err := s.Remove("ONLYENV"); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "TERN_SECRET_ONLYENV") {
		t.Fatalf("Remove of a secret only the environment has: %v", err)
	}
}

func TestMissingSecretNamesTheFixAndNoValue(t *testing.T) {
	clean(t)
	s := NewMemory()
	s.Set("OTHER", value)
	_, err := s.Get("openai_key")
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get = %v, want ErrNotFound", err)
	}
	noValue(t, err)
	for _, want := range []string{"OPENAI_KEY", "tern secret set OPENAI_KEY", "TERN_SECRET_OPENAI_KEY"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

func TestNamesAndValues(t *testing.T) {
	clean(t)
	s := NewMemory()
	for _, bad := range []string{"", "1KEY", "_KEY", "OPENAI-KEY", "OPENAI KEY", "clé", "a/b", "../x", strings.Repeat("A", 65)} {
		err := s.Set(bad, value)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "letters") {
			t.Errorf("Set(%q) = %v, want ErrInvalid saying what a name is", bad, err)
		}
		if _, err := s.Get(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Get(%q) = %v", bad, err)
		}
		if err := s.Remove(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("Remove(%q) = %v", bad, err)
		}
	}
	for _, good := range []string{"a", "K2", "OPENAI_KEY", "x_", strings.Repeat("A", 64)} {
		if err := s.Set(good, value); err != nil {
			t.Errorf("Set(%q) = %v", good, err)
		}
	}
	for _, empty := range []string{"", " ", "\n", "\t\r\n"} {
		err := s.Set("KEY", empty)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "empty") {
			t.Errorf("Set of %q = %v, want ErrInvalid", empty, err)
		}
	}
	for _, multi := range []string{value + "\n" + value, "sk-abc\r\nx", "sk\x00abc", "line one\nline two\n"} {
		err := s.Set("KEY", multi)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "one line") {
			t.Errorf("Set of a value with a line break or control character = %v, want ErrInvalid saying a key is one line", err)
		}
		noValue(t, err)
	}
	if got := EnvVar("openai_key"); got != "TERN_SECRET_OPENAI_KEY" {
		t.Errorf("EnvVar = %q", got)
	}
	if c, err := CanonicalName("openAI_key"); c != "OPENAI_KEY" || err != nil {
		t.Errorf("CanonicalName = %q, %v", c, err)
	}
}

func TestBackendChoice(t *testing.T) {
	clean(t)
	t.Setenv(BackendEnv, "memory")
	_, err := Open(t.TempDir(), nil)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "keyring, file, or auto") {
		t.Fatalf("Open with %s=memory: %v", BackendEnv, err)
	}
	t.Setenv(BackendEnv, "file")
	if _, err := Open("", nil); err == nil {
		t.Fatal("Open of the file backend without a home succeeded")
	}
}

func TestConcurrentUse(t *testing.T) {
	clean(t)
	s := NewMemory()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			name := "K" + string(rune('A'+i))
			for range 50 {
				s.Set(name, value)
				s.Get(name)
				s.List()
			}
		})
	}
	wg.Wait()
	if names, _ := s.List(); len(names) != 8 {
		t.Fatalf("List = %v", names)
	}
}
