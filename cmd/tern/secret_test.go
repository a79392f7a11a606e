package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// secretValue is what the tests store; no output and no file may show it.
const secretValue = "sk-cli-test-9b3e5d71"

// secretHome is a new TERN_HOME whose secrets go to the encrypted file
// backend with a password, so that no test touches a real OS keyring. The
// in-memory backend is no use here: each tern command is a new store.
func secretHome(t *testing.T) string {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "TERN_SECRET_") {
			t.Setenv(k, "")
			os.Unsetenv(k)
		}
	}
	t.Setenv("TERN_SECRETS_BACKEND", "file")
	t.Setenv("TERN_SECRETS_PASSWORD", "a long test password")
	return t.TempDir()
}

// noSecretIn fails the test if any output shows the value.
func noSecretIn(t *testing.T, outs ...string) {
	t.Helper()
	for _, o := range outs {
		if strings.Contains(o, secretValue) {
			t.Fatalf("output shows the secret's value: %q", o)
		}
	}
}

func TestSecretSetListRm(t *testing.T) {
	home := secretHome(t)
	code, out, errs := tern(t, home, secretValue+"\n", "secret", "set", "openai_key")
	noSecretIn(t, out, errs)
	dir := filepath.Join(home, "secrets")
	if code != 0 || out != "stored OPENAI_KEY in the encrypted files in "+dir+"\n" {
		t.Fatalf("set: exit %d, %q %q", code, out, errs)
	}
	mustTern(t, home, "sk-other", "secret", "set", "ANTHROPIC_KEY")

	out = mustTern(t, home, "", "secret", "list")
	if out != "ANTHROPIC_KEY\nOPENAI_KEY\n" {
		t.Fatalf("list printed %q", out)
	}
	var names []string
	if err := json.Unmarshal([]byte(mustTern(t, home, "", "secret", "list", "--json")), &names); err != nil ||
		!slices.Equal(names, []string{"ANTHROPIC_KEY", "OPENAI_KEY"}) {
		t.Fatalf("list --json: %v, %v", names, err)
	}

	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secretValue)) {
				t.Errorf("%s holds the value in plain text", path)
			}
		}
		return nil
	})

	out = mustTern(t, home, "", "secret", "rm", "OPENAI_KEY")
	if out != "removed OPENAI_KEY from the encrypted files in "+dir+"\n" {
		t.Fatalf("rm printed %q", out)
	}
	code, _, errs = tern(t, home, "", "secret", "rm", "OPENAI_KEY")
	if code != 2 || !strings.Contains(errs, "OPENAI_KEY not found") {
		t.Fatalf("rm of a missing secret: exit %d, %q", code, errs)
	}
	if out = mustTern(t, home, "", "secret", "list"); out != "ANTHROPIC_KEY\n" {
		t.Fatalf("list after rm printed %q", out)
	}
	mustTern(t, home, "", "secret", "rm", "anthropic_key")
	code, out, errs = tern(t, home, "", "secret", "list", "--json")
	if code != 0 || out != "[]\n" {
		t.Fatalf("list --json of no secrets: exit %d, %q %q", code, out, errs)
	}
}

func TestSecretSetReplacesAndKeepsTheValueExact(t *testing.T) {
	home := secretHome(t)
	mustTern(t, home, "first\n", "secret", "set", "KEY")
	mustTern(t, home, " with spaces \r\n", "secret", "set", "key")
	if out := mustTern(t, home, "", "secret", "list"); out != "KEY\n" {
		t.Fatalf("list printed %q", out)
	}
	// What tern stored is what a reader of the store gets.
	s, err := openSecrets(&env{stdin: strings.NewReader("")})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := s.Get("KEY"); err != nil || v != " with spaces " {
		t.Fatalf("Get = %q, %v; want the value without its trailing newline", v, err)
	}
}

func TestSecretExitCodes(t *testing.T) {
	home := secretHome(t)
	cases := []struct {
		name, stdin string
		args        []string
		code        int
		says        string
	}{
		{"a bad name", secretValue, []string{"secret", "set", "openai-key"}, 2, "a name is 1 to 64 letters"},
		{"a name starting with a digit", secretValue, []string{"secret", "set", "1KEY"}, 2, "starting with a letter"},
		{"an empty value", "", []string{"secret", "set", "KEY"}, 2, "no value for KEY on standard input"},
		{"a value of one newline", "\n", []string{"secret", "set", "KEY"}, 2, "no value for KEY"},
		{"a value of two lines", secretValue + "\n" + secretValue + "\n", []string{"secret", "set", "KEY"}, 2, "a key or token is one line"},
		{"a value too large", strings.Repeat("x", 64<<10+1), []string{"secret", "set", "KEY"}, 2, "over 64 KiB"},
		{"rm of a bad name", "", []string{"secret", "rm", "a b"}, 2, "invalid secret name"},
		{"rm of a missing secret", "", []string{"secret", "rm", "NOPE"}, 2, "secret NOPE not found in"},
		{"set without a name", secretValue, []string{"secret", "set"}, 2, "missing NAME"},
		{"list with an argument", "", []string{"secret", "list", "x"}, 2, "too many arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := tern(t, home, tc.stdin, tc.args...)
			noSecretIn(t, out, errs)
			if code != tc.code || !strings.HasPrefix(errs, "tern: ") || !strings.Contains(errs, tc.says) {
				t.Fatalf("exit %d, want %d; stderr %q, want it to say %q", code, tc.code, errs, tc.says)
			}
		})
	}
	t.Run("an unknown backend", func(t *testing.T) {
		t.Setenv("TERN_SECRETS_BACKEND", "memory")
		code, _, errs := tern(t, home, "", "secret", "list")
		if code != 2 || !strings.Contains(errs, "use keyring, file, or auto") {
			t.Fatalf("exit %d, %q", code, errs)
		}
	})
}

func TestSecretSetWithoutPasswordSaysWhatToDo(t *testing.T) {
	home := secretHome(t)
	t.Setenv("TERN_SECRETS_PASSWORD", "")
	code, out, errs := tern(t, home, secretValue, "secret", "set", "OPENAI_KEY")
	noSecretIn(t, out, errs)
	if code != 3 || !strings.Contains(errs, "TERN_SECRETS_PASSWORD") || !strings.Contains(errs, "TERN_SECRET_OPENAI_KEY") {
		t.Fatalf("exit %d, %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(home, "secrets")); err == nil {
		t.Fatal("a refused set created the secrets folder")
	}
}

func TestSecretWrongPasswordIsAFailureNotBadInput(t *testing.T) {
	home := secretHome(t)
	mustTern(t, home, secretValue, "secret", "set", "A")
	t.Setenv("TERN_SECRETS_PASSWORD", "not the password")
	code, out, errs := tern(t, home, "other", "secret", "set", "B")
	noSecretIn(t, out, errs)
	if code != 3 || !strings.Contains(errs, "does not open the secrets already in") {
		t.Fatalf("exit %d, %q", code, errs)
	}
	if out := mustTern(t, home, "", "secret", "list"); out != "A\n" {
		t.Fatalf("list printed %q", out)
	}
}
