package secrets

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zalando/go-keyring"
)

// mockKeyring makes go-keyring's in-memory mock the OS keyring, reachable,
// and returns a store of home that uses it (TERN_SECRETS_BACKEND=auto).
func mockKeyring(t *testing.T, home string) *Store {
	t.Helper()
	keyring.MockInit()
	swap(t, &probeKeyring, func() (string, error) { return "the OS keyring (mock)", nil })
	s, err := Open(home, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestKeyringRoundTripListsNamesFromTheIndex(t *testing.T) {
	clean(t)
	home := t.TempDir()
	s := mockKeyring(t, home)
	if s.Backend() != "the OS keyring (mock)" {
		t.Fatalf("Backend = %q", s.Backend())
	}
	roundTrip(t, s)
	if v, err := keyring.Get(ServiceName, "GEMINI"); err != nil || v != value+"Gemini" {
		t.Fatalf("the keyring holds %q, %v under service %s, user GEMINI", v, err, ServiceName)
	}
	// Another process (another Store) lists the names from the index.
	if got, err := mockKeyring(t, home).List(); err != nil || !slices.Equal(got, []string{"ANTHROPIC_KEY", "GEMINI"}) {
		t.Fatalf("a second store lists %v, %v", got, err)
	}
	index := filepath.Join(home, Dir, indexFile)
	data, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(value)) {
		t.Fatalf("the index holds a value: %s", data)
	}
	if want := `{"format":"tern.secret-names/1","names":["ANTHROPIC_KEY","GEMINI"]}` + "\n"; string(data) != want {
		t.Fatalf("the index holds %s, want %s", data, want)
	}
	if st, _ := os.Stat(index); st.Mode().Perm() != 0o600 {
		t.Errorf("the index has mode %v", st.Mode())
	}
}

func TestKeyringAndIndexDisagree(t *testing.T) {
	clean(t)
	s := mockKeyring(t, t.TempDir())
	// Stored by another program, or before the index: readable, not listed.
	if err := keyring.Set(ServiceName, "UNLISTED", value); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get("unlisted"); err != nil || v != value {
		t.Fatalf("Get of a secret the index lacks = %q, %v", v, err)
	}
	if err := s.Remove("UNLISTED"); err != nil {
		t.Fatalf("Remove of a secret the index lacks: %v", err)
	}
	// Listed, but removed from the keyring by another program.
	if err := s.Set("GONE", value); err != nil {
		t.Fatal(err)
	}
	keyring.Delete(ServiceName, "GONE")
	if err := s.Remove("GONE"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Remove of a secret only the index has: %v, want ErrNotFound", err)
	}
	if names, err := s.List(); err != nil || len(names) != 0 {
		t.Fatalf("the index still lists %v, %v", names, err)
	}
}

func TestKeyringFailureSaysWhatToDo(t *testing.T) {
	clean(t)
	s := mockKeyring(t, t.TempDir())
	keyring.MockInitWithError(errors.New("the collection is locked"))
	err := s.Set("KEY", value)
	if err == nil || !strings.Contains(err.Error(), "unlock") || !strings.Contains(err.Error(), BackendEnv+"=file") {
		t.Fatalf("Set to a locked keyring: %v", err)
	}
	noValue(t, err)
	_, err = s.Get("KEY")
	if err == nil || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "locked") {
		t.Fatalf("Get from a locked keyring: %v", err)
	}
	t.Setenv("TERN_SECRET_KEY", "from-env")
	if v, err := s.Get("KEY"); err != nil || v != "from-env" {
		t.Fatalf("Get = %q, %v; want the environment's value", v, err)
	}
	if names, _ := s.List(); len(names) != 0 {
		t.Fatalf("a failed Set listed %v", names)
	}
}

func TestKeyringCallsAreBounded(t *testing.T) {
	swap(t, &keyringTimeout, 20*time.Millisecond)
	release := make(chan struct{})
	defer close(release)
	start := time.Now()
	_, err := callKeyring(func() (string, error) { <-release; return value, nil })
	if err == nil || !strings.Contains(err.Error(), "no answer within") || time.Since(start) > 5*time.Second {
		t.Fatalf("a keyring that never answers: %v after %v", err, time.Since(start))
	}
}

func TestTheKeyringIsLookedForOnFirstUseOnly(t *testing.T) {
	clean(t)
	keyring.MockInit()
	probes := 0
	swap(t, &probeKeyring, func() (string, error) { probes++; return "the OS keyring (mock)", nil })
	s, err := Open(t.TempDir(), nil)
	if err != nil || probes != 0 {
		t.Fatalf("Open: %v, %d probes; want none", err, probes)
	}
	s.List()
	s.Get("X")
	s.Backend()
	if probes != 1 {
		t.Fatalf("%d probes, want 1", probes)
	}

	// Forced to the keyring, Open looks at once, and says what to do.
	swap(t, &probeKeyring, func() (string, error) { return "", errors.New("no D-Bus session bus") })
	t.Setenv(BackendEnv, "keyring")
	_, err = Open(t.TempDir(), nil)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no D-Bus session bus") || !strings.Contains(err.Error(), BackendEnv+"=file") {
		t.Fatalf("Open with %s=keyring and no keyring: %v", BackendEnv, err)
	}
	// Forced to the file, it never looks.
	t.Setenv(BackendEnv, "file")
	swap(t, &probeKeyring, func() (string, error) { t.Fatal("looked for a keyring"); return "", nil })
	if s, err := Open(t.TempDir(), nil); err != nil || !strings.HasPrefix(s.Backend(), "the encrypted files in ") {
		t.Fatalf("Open with %s=file: %v", BackendEnv, err)
	}
}
