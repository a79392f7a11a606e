package secrets

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// realKDF is newKDF as shipped, before clean lowers it.
var realKDF = newKDF

func TestFileFormat(t *testing.T) {
	clean(t)
	swap(t, &newKDF, realKDF)
	home := t.TempDir()
	s := fileStore(t, home, "pw")
	if err := s.Set("KEY", value); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(home, Dir)
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Errorf("%s has mode %v, want 0700", dir, st.Mode())
	}
	for _, name := range []string{"KEY.secret", "password-check.secret"} {
		path := filepath.Join(dir, name)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Format, KDF             string
			T, M, P                 int
			Salt, Nonce, Ciphertext []byte
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatal(err)
		}
		if f.Format != "tern.secret/1" || f.KDF != "argon2id" || f.T != 3 || f.M != 64<<10 || f.P != 4 ||
			len(f.Salt) != 16 || len(f.Nonce) != 12 {
			t.Errorf("%s: %s", name, data)
		}
		if name == "KEY.secret" && len(f.Ciphertext) != len(value)+16 {
			t.Errorf("%s: %d bytes of ciphertext for %d of value", name, len(f.Ciphertext), len(value))
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v, want 0600", path, st.Mode())
		}
	}
	if v, err := fileStore(t, home, "pw").Get("KEY"); err != nil || v != value {
		t.Fatalf("Get = %q, %v", v, err)
	}
}

func TestFileRenamedOrAlteredDoesNotOpen(t *testing.T) {
	clean(t)
	home := t.TempDir()
	dir := filepath.Join(home, Dir)
	s := fileStore(t, home, "pw")
	if err := s.Set("A", value); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "A.secret"))
	os.WriteFile(filepath.Join(dir, "B.secret"), data, 0o600)
	var f map[string]any
	json.Unmarshal(data, &f)
	f["ciphertext"] = "AAAA" + f["ciphertext"].(string)[4:]
	altered, _ := json.Marshal(f)
	os.WriteFile(filepath.Join(dir, "C.secret"), altered, 0o600)
	for _, name := range []string{"B", "C"} {
		_, err := fileStore(t, home, "pw").Get(name)
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "altered, or copied") {
			t.Errorf("Get(%s): %v", name, err)
		}
		noValue(t, err)
	}
}

func TestFileWithHostileParametersIsRefusedAtOnce(t *testing.T) {
	clean(t)
	home := t.TempDir()
	dir := filepath.Join(home, Dir)
	os.MkdirAll(dir, 0o700)
	hostile := `{"format":"tern.secret/1","kdf":"argon2id","t":1,"m":4294967295,"p":1,"salt":"AAAAAAAAAAAAAAAAAAAAAA==","nonce":"AAAAAAAAAAAAAAAA","ciphertext":"AAAA"}`
	os.WriteFile(filepath.Join(dir, "KEY.secret"), []byte(hostile), 0o600)
	start := time.Now()
	_, err := fileStore(t, home, "pw").Get("KEY")
	if err == nil || !strings.Contains(err.Error(), "out of bounds") || !strings.Contains(err.Error(), "tern secret rm KEY") {
		t.Fatalf("Get: %v", err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("took %v", time.Since(start))
	}
}

func TestFileCheckFileKeepsOnePasswordPerFolder(t *testing.T) {
	clean(t)
	home := t.TempDir()
	check := filepath.Join(home, Dir, "password-check.secret")
	if err := fileStore(t, home, "right").Set("A", value); err != nil {
		t.Fatal(err)
	}
	// Without the check file, the secrets there still refuse a wrong one,
	// and the right one writes the check file again.
	os.Remove(check)
	if err := fileStore(t, home, "wrong").Set("B", value); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("Set with a wrong password and no check file: %v", err)
	}
	if err := fileStore(t, home, "right").Set("B", value); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(check); err != nil {
		t.Fatalf("no check file: %v", err)
	}
	// With the last secret goes the check file: an empty folder takes a
	// new password.
	s := fileStore(t, home, "")
	for _, n := range []string{"A", "B"} {
		if err := s.Remove(n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(check); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the check file outlived the secrets: %v", err)
	}
	if err := fileStore(t, home, "new").Set("C", value); err != nil {
		t.Fatalf("Set with a new password in an empty folder: %v", err)
	}
	if names, _ := s.List(); !slices.Equal(names, []string{"C"}) {
		t.Fatalf("List = %v", names)
	}
}

func TestFileKeyIsDerivedOncePerStore(t *testing.T) {
	clean(t)
	s := fileStore(t, t.TempDir(), "pw")
	for _, n := range []string{"A", "B", "C"} {
		if err := s.Set(n, value); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(n); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.b.(*files).keys); n != 1 {
		t.Fatalf("%d keys derived, want 1", n)
	}
}
