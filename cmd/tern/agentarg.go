package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/store"
)

// agentArgNames are the names usage lines give a positional argument that
// names an agent: an agent id (or, where the name says so, a capsule
// folder or tar instead).
var agentArgNames = map[string]bool{
	"AGENT": true, "ID": true, "AGENT-ID": true, "AGENT|DIR": true, "DIR|AGENT": true,
	"DIR|AGENT-ID": true, "FILE.tar|DIR|AGENT-ID": true, "PATH": true, "A": true, "B": true,
}

// minAgentPrefix is the fewest characters of an agent id that name it.
const minAgentPrefix = 4

// resolveAgentArgs is every command's one resolver of the arguments that
// name an agent (its usage line calls them AGENT, ID, PATH…): an argument
// that is neither a file here nor an agent id, but a unique prefix of at
// least minAgentPrefix characters of the id of an agent the node of
// $TERN_HOME holds, or that agent's name, is replaced by its id before the
// command runs. One that names several is refused (exit 2) listing them;
// one that names none is left for the command to refuse.
func resolveAgentArgs(cmd *cobra.Command, args []string) error {
	for _, i := range agentArgPositions(cmd.Use) {
		if i >= len(args) {
			break
		}
		id, err := resolveAgent(args[i])
		if err != nil {
			return err
		}
		if id != "" {
			args[i] = id
		}
	}
	return nil
}

// agentArgPositions are the positions of the arguments of a usage line
// that name an agent ("turn AGENT MESSAGE" → 0; "actions [AGENT]" → 0).
func agentArgPositions(use string) []int {
	var at []int
	for i, f := range strings.Fields(use)[1:] {
		if strings.HasPrefix(f, "-") || strings.HasPrefix(f, "(") {
			break
		}
		if agentArgNames[strings.Trim(f, "[].")] {
			at = append(at, i)
		}
	}
	return at
}

// resolveAgent is the agent id arg names when it is neither a file here
// nor an agent id itself: a unique prefix of an id or an agent's name,
// among the agents the node of $TERN_HOME holds. "" if it names none.
func resolveAgent(arg string) (string, error) {
	if _, err := os.Stat(arg); err == nil || capsule.ValidAgentID(arg) || arg == "" {
		return "", nil
	}
	home, err := node.Home()
	if err != nil {
		return "", nil
	}
	held, err := heldAgents(home)
	if err != nil {
		return "", nil
	}
	var matches []heldName
	for _, a := range held {
		if a.name == arg || len(arg) >= minAgentPrefix && strings.HasPrefix(a.id, strings.ToLower(arg)) {
			matches = append(matches, a)
		}
	}
	switch len(matches) {
	case 0:
		return "", nil
	case 1:
		return matches[0].id, nil
	}
	var list []string
	for _, m := range matches {
		list = append(list, "  "+m.id+nameSuffix(m.name))
	}
	return "", fmt.Errorf("%q names %s the node holds:\n%s\ngive more of the agent id", arg, plural(len(matches), "agent"), strings.Join(list, "\n"))
}

// heldName is an agent the node of a home holds, and its name.
type heldName struct{ id, name string }

// heldAgents lists the agents in home's capsule store, by id, with the
// names their agent.json gives them (read as files: no capsule is opened
// or locked, so it works whether the node runs or not).
func heldAgents(home string) ([]heldName, error) {
	entries, err := os.ReadDir(filepath.Join(home, store.CapsulesDir))
	if err != nil {
		return nil, err
	}
	var out []heldName
	for _, e := range entries {
		if !e.IsDir() || !capsule.ValidAgentID(e.Name()) {
			continue
		}
		a := heldName{id: e.Name()}
		var agent struct {
			Name string `json:"name"`
		}
		if data, err := os.ReadFile(filepath.Join(home, store.CapsulesDir, e.Name(), capsule.AgentFile)); err == nil && json.Unmarshal(data, &agent) == nil {
			a.name = agent.Name
		}
		out = append(out, a)
	}
	slices.SortFunc(out, func(x, y heldName) int { return strings.Compare(x.id, y.id) })
	return out, nil
}
