package capsule

import (
	"strings"
	"testing"
)

func TestTheEnvironmentSpecRefusesSecretsUnderEnv(t *testing.T) {
	cases := []struct {
		name, spec, want string
	}{
		{"AWS secret key under env", `{"workdir":"w","packages":[],"env":{"AWS_SECRET_ACCESS_KEY":"abc"},"secrets":[]}`, "declare its name under \"secrets\""},
		{"GitHub token under env", `{"workdir":"w","packages":[],"env":{"GITHUB_TOKEN":"ghp_x"},"secrets":[]}`, "GITHUB_TOKEN looks like a secret"},
		{"a password under env", `{"workdir":"w","packages":[],"env":{"DB_PASSWORD":"x"},"secrets":[]}`, "DB_PASSWORD"},
		{"an API key under env", `{"workdir":"w","packages":[],"env":{"OPENAI_API_KEY":"sk"},"secrets":[]}`, "OPENAI_API_KEY"},
		{"a name both plain and secret", `{"workdir":"w","packages":[],"env":{"X":"1"},"secrets":["X"]}`, "both under env and under secrets"},
		{"a bad secret name", `{"workdir":"w","packages":[],"env":{},"secrets":["not a name"]}`, "not a variable name"},
		{"a missing field", `{"workdir":"w","packages":[],"env":{}}`, `"secrets" is missing`},
		{"an unknown field", `{"workdir":"w","packages":[],"env":{},"secrets":[],"values":{}}`, "unknown field"},
		{"not an object", `["w"]`, "the file must hold a JSON object, not a list"},
		{"a value of the wrong type", `{"workdir":"w","packages":"git","env":{},"secrets":[]}`, `"packages" must be a list, not a string`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseEnvSpec([]byte(tc.spec))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestTheEnvironmentSpecAcceptsSecretNamesAndHarmlessVariables(t *testing.T) {
	spec := `{"workdir":"workspace","packages":["git","python3"],"env":{"TOKENIZERS_PARALLELISM":"false","KEYBOARD":"us","PATH":"/bin","LANG":"C"},"secrets":["GITHUB_TOKEN","AWS_SECRET_ACCESS_KEY"]}`
	s, err := ParseEnvSpec([]byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Secrets) != 2 || s.Env["LANG"] != "C" {
		t.Fatalf("spec = %+v", s)
	}
}
