package tool

import (
	"slices"
	"strings"
	"testing"

	"github.com/tern-dev/tern/capsule"
)

func TestCommandEnv(t *testing.T) {
	node := []string{
		"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm", "TZ=Europe/Paris",
		"HOME=/home/person", "TMPDIR=/var/tmp/node", "USER=person",
		"TERN_SECRETS_PASSWORD=hunter2", "TERN_HOME=/home/person/.tern", "TERN_SECRET_OPENAI_KEY=sk-1",
		"DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus", "SSH_AUTH_SOCK=/tmp/ssh-agent", "AWS_PROFILE=prod",
	}
	tests := []struct {
		name     string
		host     []string
		declared []string
		want     []string
	}{
		{"of the node's environment only PATH, LANG, TERM and TZ pass; HOME is the workspace, TMPDIR the temporary folder",
			node, nil,
			[]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm", "TZ=Europe/Paris", "HOME=/ws", "TMPDIR=/tmp"}},
		{"what the node lacks is not made up",
			[]string{"PATH=/bin"}, nil,
			[]string{"PATH=/bin", "HOME=/ws", "TMPDIR=/tmp"}},
		{"the declared variables come last",
			node, []string{"GITHUB_TOKEN=ghp-2", "LOG_LEVEL=warn"},
			[]string{"PATH=/usr/bin:/bin", "LANG=C.UTF-8", "TERM=xterm", "TZ=Europe/Paris", "HOME=/ws", "TMPDIR=/tmp", "GITHUB_TOKEN=ghp-2", "LOG_LEVEL=warn"}},
		{"a declared variable replaces one of the allow-list in place",
			node, []string{"PATH=/opt/agent/bin", "HOME=/ws/home"},
			[]string{"PATH=/opt/agent/bin", "LANG=C.UTF-8", "TERM=xterm", "TZ=Europe/Paris", "HOME=/ws/home", "TMPDIR=/tmp"}},
		{"a declared entry without a value is left out, a later one wins",
			nil, []string{"BROKEN", "=x", "A=1", "A=2"},
			[]string{"HOME=/ws", "TMPDIR=/tmp", "A=2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := commandEnv(tt.host, "/ws", "/tmp", tt.declared); !slices.Equal(got, tt.want) {
				t.Fatalf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDeclaredEnvGivesTheSpecsVariablesAndSecrets(t *testing.T) {
	spec := capsule.EnvSpec{Env: map[string]string{"B": "2", "A": "1"}, Secrets: []string{"GITHUB_TOKEN"}}
	got, err := DeclaredEnv(spec, mapSecrets{"GITHUB_TOKEN": "ghp-2"})
	if want := []string{"A=1", "B=2", "GITHUB_TOKEN=ghp-2"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("got %q, %v; want %q", got, err, want)
	}
	_, err = DeclaredEnv(spec, mapSecrets{})
	if err == nil || !strings.Contains(err.Error(), "needs the secret GITHUB_TOKEN") || !strings.Contains(err.Error(), "tern secret set GITHUB_TOKEN") {
		t.Fatalf("a secret that does not resolve: %v", err)
	}
	if _, err := DeclaredEnv(spec, nil); err == nil || !strings.Contains(err.Error(), "no secret store") {
		t.Fatalf("no store: %v", err)
	}
}
