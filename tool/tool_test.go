package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/tern-dev/tern/capsule"
)

// Defaults are the seven built-ins as agent.json lists them, and a new
// agent.json holding them parses.
func TestDefaults(t *testing.T) {
	defs := Defaults()
	var names []string
	for _, d := range defs {
		names = append(names, d.Name)
		var s struct {
			Type                 string         `json:"type"`
			Properties           map[string]any `json:"properties"`
			Required             []string       `json:"required"`
			AdditionalProperties bool           `json:"additionalProperties"`
		}
		if err := json.Unmarshal(d.Parameters, &s); err != nil || s.Type != "object" || s.AdditionalProperties || s.Required == nil {
			t.Errorf("%s: parameters %s (%v)", d.Name, d.Parameters, err)
		}
		for _, r := range s.Required {
			if s.Properties[r] == nil {
				t.Errorf("%s: required %s is no property", d.Name, r)
			}
		}
		if d.Description == "" {
			t.Errorf("%s has no description", d.Name)
		}
	}
	if want := []string{"read_file", "list_files", "write_file", "shell", "http_request", "memory_search", "memory_note"}; !slices.Equal(names, want) {
		t.Fatalf("names %v, want %v", names, want)
	}
	a := capsule.DefaultAgent("helper")
	a.Tools = defs
	b, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	back, err := capsule.ParseAgent(b)
	if err != nil {
		t.Fatal(err)
	}
	for i, tl := range back.Tools {
		var got, want bytes.Buffer
		json.Compact(&got, tl.Parameters)
		json.Compact(&want, defs[i].Parameters)
		if tl.Effect != defs[i].Effect || got.String() != want.String() {
			t.Errorf("%s changed through agent.json: %+v", tl.Name, tl)
		}
	}
}

func TestEffectOf(t *testing.T) {
	cases := []struct {
		name, args string
		effect     string
		approval   bool
	}{
		{"read_file", `{"path":"a"}`, Pure, false},
		{"list_files", `{}`, Pure, false},
		{"write_file", `{"path":"a","content":""}`, Idempotent, true},
		{"shell", `{"command":"ls"}`, AtMostOnce, true},
		{"http_request", `{"method":"GET","url":"http://x"}`, Idempotent, false},
		{"http_request", `{"method":"get","url":"http://x"}`, Idempotent, false},
		{"http_request", `{"method":"HEAD","url":"http://x"}`, Idempotent, false},
		{"http_request", `{"method":"POST","url":"http://x"}`, AtMostOnce, true},
		{"http_request", `{"method":"DELETE","url":"http://x"}`, AtMostOnce, true},
		{"http_request", `{"url":"http://x"}`, AtMostOnce, true},
		{"http_request", `"not json`, AtMostOnce, true},
		{"mcp_something", `{}`, AtMostOnce, true},
	}
	for _, c := range cases {
		effect, approval := EffectOf(c.name, json.RawMessage(c.args))
		if effect != c.effect || approval != c.approval {
			t.Errorf("%s %s: %s, approval %v; want %s, %v", c.name, c.args, effect, approval, c.effect, c.approval)
		}
	}
}

// Arguments that do not match the schema are an error result naming the
// field, and nothing runs.
func TestBadArguments(t *testing.T) {
	ws, _ := workspace(t, map[string]string{"a.txt": "A"})
	cases := []struct {
		tool, args, says string
	}{
		{"read_file", `{}`, "read_file: missing field path"},
		{"read_file", `null`, "read_file: missing field path"},
		{"read_file", `{"path":1}`, "field path must be a string, not 1"},
		{"read_file", `{"path":null}`, "field path is null"},
		{"read_file", `{"path":"a.txt","extra":1,"more":2}`, "unknown field extra, more (the fields are path, offset?, limit?)"},
		{"read_file", `{"path":"a.txt","offset":-1}`, "field offset must be at least 0, not -1"},
		{"read_file", `{"path":"a.txt","offset":1.5}`, "field offset must be an integer, not 1.5"},
		{"read_file", `{"path":"a.txt","offset":"3"}`, `field offset must be an integer, not "3"`},
		{"read_file", `{"path":"a.txt","limit":70000}`, "field limit must be from 1 to 65536, not 70000"},
		{"read_file", `{"path":""}`, "path is empty"},
		{"read_file", `"{\"path\": \"a.txt\""`, "the arguments are not a JSON object (path, offset?, limit?)"},
		{"read_file", `[1]`, "not a JSON object"},
		{"list_files", `{"recursive":"yes"}`, `field recursive must be true or false, not "yes"`},
		{"write_file", `{"path":"b.txt"}`, "missing field content"},
		{"write_file", `{"path":"b.txt","content":7}`, "field content must be a string"},
		{"shell", `{"command":"touch ran","timeout_s":601}`, "field timeout_s must be from 1 to 600, not 601"},
		{"shell", `{"command":"  "}`, "field command is empty"},
		{"shell", `{"cmd":"touch ran"}`, "unknown field cmd (the fields are command, timeout_s?)"},
		{"http_request", `{"method":"FETCH","url":"http://x"}`, `field method must be one of GET, HEAD, POST, PUT, PATCH, DELETE, not "FETCH"`},
		{"http_request", `{"method":"GET"}`, "missing field url"},
		{"http_request", `{"method":"GET","url":"http://x","headers":{"A":1}}`, "field headers must be an object of strings"},
	}
	for _, c := range cases {
		res := call(t, c.tool, ws, json.RawMessage(c.args), "op1")
		wantError(t, res, c.says)
	}
	if entries, _ := readDirNames(ws); !slices.Equal(entries, []string{"a.txt"}) {
		t.Fatalf("something ran: the workspace holds %v", entries)
	}
}

func readDirNames(dir string) ([]string, error) {
	root, err := openWorkspace(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	slices.Sort(names)
	return names, err
}

// A call whose context is already done does not run: a Go error.
func TestCancelledBeforeRun(t *testing.T) {
	ws, _ := workspace(t, map[string]string{"a.txt": "A"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for name, args := range map[string]string{
		"read_file":    `{"path":"a.txt"}`,
		"list_files":   `{}`,
		"write_file":   `{"path":"b.txt","content":"B"}`,
		"shell":        `{"command":"touch c.txt"}`,
		"http_request": `{"method":"GET","url":"http://127.0.0.1:1/"}`,
	} {
		if _, err := callErr(t, ctx, name, ws, json.RawMessage(args), "op1"); err == nil {
			t.Errorf("%s ran with its context done", name)
		}
	}
	if entries, _ := readDirNames(ws); !slices.Equal(entries, []string{"a.txt"}) {
		t.Fatalf("something ran: the workspace holds %v", entries)
	}
}
