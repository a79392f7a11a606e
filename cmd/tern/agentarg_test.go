package main

import (
	"slices"
	"strings"
	"testing"
)

// Every command that takes an agent id takes a unique prefix of it (4
// characters at least) or the agent's name, as tern status shows them; a
// name or prefix that names several agents is refused, listing them.
func TestAnAgentIsNamedByAPrefixOfItsIDOrByItsName(t *testing.T) {
	home := t.TempDir()
	runNode(t, home)
	helper1 := importAgent(t, home, nil)
	helper2 := importAgent(t, home, nil)
	planner := importAgent(t, home, func(a map[string]any) { a["name"] = "planner" })

	for _, arg := range []string{planner[:8], strings.ToUpper(planner[:4]), "planner"} {
		if code, out, errs := tern(t, home, "", "turn", arg, "hello"); code != 0 || out != "OK. You said: \"hello\"\n" {
			t.Errorf("turn %s: exit %d, %q %q", arg, code, out, errs)
		}
	}
	if out := mustTern(t, home, "", "holder", "planner"); !strings.Contains(out, "active") {
		t.Errorf("holder planner: %q", out)
	}
	if out := mustTern(t, home, "", "capsule", "inspect", planner[:6]); !strings.Contains(out, planner+" (planner)") {
		t.Errorf("capsule inspect by prefix: %q", out)
	}
	if out := mustTern(t, home, "", "session", "list", "planner"); strings.Count(out, "ses_") != 3 {
		t.Errorf("session list planner: %q, want the 3 sessions of the turns above", out)
	}

	code, _, errs := tern(t, home, "", "turn", "helper", "hello")
	if code != exitBadInput || !strings.Contains(errs, `"helper" names 2 agents`) || !strings.Contains(errs, helper1+" (helper)") || !strings.Contains(errs, helper2+" (helper)") {
		t.Errorf("an ambiguous name: exit %d, %q; want 2 listing both agents", code, errs)
	}
	for _, arg := range []string{planner[:3], "nobody"} {
		if code, _, errs := tern(t, home, "", "turn", arg, "hello"); code != exitBadInput || !strings.Contains(errs, "is not an agent id, a prefix of one") {
			t.Errorf("turn %s: exit %d, %q; want 2 saying it names no agent", arg, code, errs)
		}
	}
}

func TestAgentArgumentsAreFoundByTheirUsageNames(t *testing.T) {
	for use, want := range map[string][]int{
		"turn AGENT MESSAGE [--session S]":             {0},
		"actions [AGENT] [--json]":                     {0},
		"merge A B -o OUT":                             {0, 1},
		"add DIR|AGENT PEER":                           {0},
		"approve ACTION_ID... [--deny ACTION_ID...]":   nil,
		"new DIR --name NAME":                          nil,
		"wait ID --peer PEER [--timeout DUR]":          {0},
		"respond ACTION_ID... (--output JSON... | ID)": nil,
	} {
		if got := agentArgPositions(use); !slices.Equal(got, want) {
			t.Errorf("%q: %v, want %v", use, got, want)
		}
	}
}
