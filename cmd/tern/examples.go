package main

import "github.com/spf13/cobra"

// examples are the Examples: sections of the commands that do not set
// their own where they are defined (every runnable command has one;
// TestEveryCommandHasExamples checks).
var examples = map[string]string{
	"tern approve":         "  tern approve act_approval_…\n  tern approve act_approval_A act_approval_B --deny act_approval_C",
	"tern deny":            "  tern deny act_approval_…\n  tern deny act_client_output_…   # the client will not run it",
	"tern bench migrate":   "  tern bench migrate",
	"tern bench sync":      "  tern bench sync",
	"tern capsule list":    "  tern capsule list\n  tern capsule list --json | jq -r '.[] | select(.runs) | .id'",
	"tern capsule share":   "  tern capsule share $AGENT desktop",
	"tern capsule unshare": "  tern capsule unshare $AGENT desktop",
	"tern demo":            "  tern demo\n  tern demo --keep",
	"tern migrate resolve": "  tern migrate resolve $AGENT --resume --force   # on the machine that should run it",
	"tern peer list":       "  tern peer list\n  tern peer list --json | jq -r '.[].name'",
	"tern peer pending":    "  tern peer pending\n  tern peer add 12D3KooW… --name desktop",
	"tern peer remove":     "  tern peer remove desktop",
	"tern secret list":     "  tern secret list",
	"tern secret rm":       "  tern secret rm OPENAI_KEY",
	"tern session list":    "  tern session list $AGENT",
	"tern simnet":          "  tern simnet --seeds 20000\n  tern simnet --layer node --seed 42 --trace",
	"tern version":         "  tern version",
}

// addExamples sets the examples above on the command tree.
func addExamples(c *cobra.Command) {
	if ex, ok := examples[c.CommandPath()]; ok && c.Example == "" {
		c.Example = ex
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
