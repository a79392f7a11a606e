package capsule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// EnvSpec is environment/spec.json: how to rebuild the agent's sandbox.
// Secrets appear by name only: a capsule never holds a secret's value.
// Supplying the values is the job of whatever runs the agent on a machine;
// tern runs no agent yet and reads no secret values.
type EnvSpec struct {
	Workdir  string            `json:"workdir"`
	Packages []string          `json:"packages"`
	Env      map[string]string `json:"env"`
	Secrets  []string          `json:"secrets"`
}

// DefaultEnvSpec is the environment of a new capsule.
func DefaultEnvSpec() EnvSpec {
	return EnvSpec{Workdir: "workspace", Packages: []string{}, Env: map[string]string{}, Secrets: []string{}}
}

// Encode returns spec.json's bytes: indented JSON ending in a newline.
func (s EnvSpec) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// secretWords are name parts (split on "_") that mark a variable as a secret.
var secretWords = map[string]bool{
	"TOKEN": true, "TOKENS": true, "KEY": true, "KEYS": true, "APIKEY": true,
	"SECRET": true, "SECRETS": true, "PASSWORD": true, "PASSWD": true,
	"PASSPHRASE": true, "CREDENTIAL": true, "CREDENTIALS": true, "PAT": true,
	"COOKIE": true, "SESSIONID": true,
}

// secretFragments mark a secret wherever they appear in a name.
var secretFragments = []string{"SECRET", "PASSWORD", "CREDENTIAL", "APIKEY", "ACCESSKEY", "AUTHTOKEN"}

// LooksSecret reports whether an environment variable's name suggests that
// its value is a secret (AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN, DB_PASSWORD…).
// Names such as TOKENIZERS_PARALLELISM or KEYBOARD are not secrets.
func LooksSecret(name string) bool {
	up := strings.ToUpper(name)
	for _, part := range strings.Split(up, "_") {
		if secretWords[part] {
			return true
		}
	}
	for _, f := range secretFragments {
		if strings.Contains(up, f) {
			return true
		}
	}
	return false
}

// ParseEnvSpec reads and validates environment/spec.json: every field
// present and of the right type, no unknown fields, variable and secret
// names well formed, no name both a plain variable and a secret, and no
// plain variable that looks like a secret.
func ParseEnvSpec(data []byte) (EnvSpec, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return EnvSpec{}, fmt.Errorf("environment spec: %s", describeJSONError(data, err))
	}
	for _, f := range []string{"workdir", "packages", "env", "secrets"} {
		if v, ok := raw[f]; !ok || string(v) == "null" {
			return EnvSpec{}, fmt.Errorf("environment spec: %q is missing", f)
		}
	}
	var s EnvSpec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return EnvSpec{}, fmt.Errorf("environment spec: %s", describeJSONError(data, err))
	}
	return s, s.Validate()
}

// Validate checks the rules of ParseEnvSpec on a spec built in code.
func (s EnvSpec) Validate() error {
	if strings.ContainsRune(s.Workdir, 0) {
		return fmt.Errorf("environment spec: workdir contains a NUL byte")
	}
	for i, p := range s.Packages {
		if strings.TrimSpace(p) == "" {
			return fmt.Errorf("environment spec: packages[%d] is empty", i)
		}
	}
	secrets := map[string]bool{}
	for i, name := range s.Secrets {
		if !envNamePattern.MatchString(name) {
			return fmt.Errorf("environment spec: secrets[%d] %q is not a variable name (letters, digits, _)", i, name)
		}
		if secrets[name] {
			return fmt.Errorf("environment spec: secret %s is listed twice", name)
		}
		secrets[name] = true
	}
	names := make([]string, 0, len(s.Env))
	for name := range s.Env {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !envNamePattern.MatchString(name) {
			return fmt.Errorf("environment spec: env %q is not a variable name (letters, digits, _)", name)
		}
		if secrets[name] {
			return fmt.Errorf("environment spec: %s is both under env and under secrets; keep it only under secrets", name)
		}
		if LooksSecret(name) {
			return fmt.Errorf("environment spec: env %s looks like a secret; its value must not be stored in the capsule: remove it from env and declare its name under \"secrets\" (the capsule keeps only the name; the value stays on the machine that runs the agent)", name)
		}
	}
	return nil
}
