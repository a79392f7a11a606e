package tool

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tern-dev/tern/capsule"
)

// hostEnv names the variables of the node's environment a program the
// agent runs inherits: what finds programs and says how to show text.
var hostEnv = []string{"PATH", "LANG", "TERM", "TZ"}

// commandEnv is the environment of a program the agent runs, a shell
// command or a stdio MCP server. Of host, the node's environment, it keeps
// only the variables hostEnv names; HOME is the workspace and TMPDIR is
// temp; then come declared, the variables the agent's environment
// declares for it ("NAME=value"), which replace any of those. Nothing
// else of the node's environment reaches the program: not the password of
// its secrets, not a key, token or address it was given. Each name
// appears once, in that order; an entry of declared without "=" is left
// out.
func commandEnv(host []string, workspace, temp string, declared []string) []string {
	var out []string
	seen := map[string]int{} // name → index in out
	set := func(kv string) {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return
		}
		if i, dup := seen[name]; dup {
			out[i] = kv
			return
		}
		seen[name] = len(out)
		out = append(out, kv)
	}
	for _, kv := range host {
		if name, _, _ := strings.Cut(kv, "="); slices.Contains(hostEnv, name) {
			set(kv)
		}
	}
	set("HOME=" + workspace)
	set("TMPDIR=" + temp)
	for _, kv := range declared {
		set(kv)
	}
	return out
}

// DeclaredEnv is what an agent's environment (environment/spec.json)
// declares for the programs it runs, as Call.Env takes it: each variable
// of env, and each secret of secrets under its own name with its value
// from this machine's store. It fails, naming the secret and the fix, if
// a secret does not resolve here.
func DeclaredEnv(spec capsule.EnvSpec, secrets Secrets) ([]string, error) {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(spec.Env)) {
		out = append(out, name+"="+spec.Env[name])
	}
	for _, name := range spec.Secrets {
		if secrets == nil {
			return nil, fmt.Errorf("the agent's environment needs the secret %s, and no secret store is open", name)
		}
		v, err := secrets.Get(name)
		if err != nil {
			return nil, fmt.Errorf("the agent's environment needs the secret %s: %w (set it here with tern secret set %s)", name, err, name)
		}
		out = append(out, name+"="+v)
	}
	return out, nil
}
