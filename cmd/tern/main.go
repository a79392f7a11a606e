// Command tern keeps an AI agent's state as a folder of plain files (a
// capsule) and moves it between a person's own machines.
//
// Exit codes: 0 success, 1 a check failed (verify found a problem), 2 bad
// usage or bad input, 3 a failure that is neither (see exitFailed).
package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"

	"github.com/libp2p/go-libp2p/gologshim"

	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
	"github.com/tern-dev/tern/capsule"
	"github.com/tern-dev/tern/node"
	"github.com/tern-dev/tern/provider"
	"github.com/tern-dev/tern/store"
)

// Exit codes of every tern command.
const (
	exitOK       = 0
	exitCheck    = 1 // a check failed: verify found damage, a merge left a fork, a wait timed out
	exitBadInput = 2 // bad usage or bad input: a bad flag, file, line or path, a write that would fork a chain
	// exitInterrupted: Ctrl-C stopped a command that follows what the node
	// does (a turn goes on there), as shells report a SIGINT.
	exitInterrupted = 130
	// exitFailed is a failure that says nothing about the input: an I/O
	// error, a network error, no node running, a lock another process
	// holds, a file verify could not read. Trying again may work.
	exitFailed = 3
)

// exitError carries the exit code an error should end the process with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// checkFailed ends the command with exit code 1 and msg on stderr.
func checkFailed(format string, args ...any) error {
	return &exitError{exitCheck, fmt.Errorf(format, args...)}
}

func main() {
	if os.Getenv("GOLOG_LOG_LEVEL") == "" {
		// go-libp2p's own log lines (its format, its source paths) say
		// again what tern reports in its words, such as a port in use; set
		// GOLOG_LOG_LEVEL (e.g. error) to see them.
		gologshim.SetDefaultHandler(slog.DiscardHandler)
	}
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes the tern command line args and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	if msg := err.Error(); msg != "" {
		fmt.Fprintln(stderr, "tern:", msg)
	}
	return exitCode(err)
}

// exitCode is the exit code an error ends a command with.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var aerr *api.APIError
	if errors.As(err, &aerr) {
		if aerr.Status >= 500 || aerr.Status == http.StatusUnauthorized || aerr.Status == http.StatusForbidden {
			return exitFailed // the node's own failure, or a node.json that does not match it
		}
		return exitBadInput
	}
	var perr *provider.Error
	if errors.As(err, &perr) {
		return exitFailed // a model or embedding API that failed: trying again may work
	}
	switch {
	case errors.Is(err, api.ErrNotRunning), errors.Is(err, capsule.ErrLocked),
		errors.Is(err, store.ErrChainBusy), errors.Is(err, node.ErrHomeInUse):
		return exitFailed
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrExist):
		return exitBadInput // a path the user named
	}
	var errno syscall.Errno
	var netErr net.Error
	if errors.As(err, &errno) || errors.As(err, &netErr) {
		if errno == syscall.ENOTDIR || errno == syscall.EISDIR {
			return exitBadInput
		}
		return exitFailed
	}
	return exitBadInput
}

// env is what every command gets: its streams and a logger on stderr.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
	quiet          bool // --quiet: no line saying what a command did
}

// done says, on stderr, what a command that prints no data did, unless
// --quiet: one line a person can read (stdout stays for data).
func (e *env) done(format string, args ...any) {
	if !e.quiet {
		fmt.Fprintf(e.stderr, format+"\n", args...)
	}
}

// identity loads this machine's key from $TERN_HOME, creating it on first use.
func (e *env) identity() (*node.Identity, error) {
	home, err := node.Home()
	if err != nil {
		return nil, err
	}
	return node.LoadIdentity(home)
}

func newRoot(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	e := &env{stdin: stdin, stdout: stdout, stderr: stderr,
		log: slog.New(newLineHandler(stderr, slog.LevelInfo, false))}
	root := &cobra.Command{
		Use:           "tern",
		Short:         "Keep an AI agent's state as plain files and move it between your machines",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          groupArgs,
		RunE:          showHelp,
		// Every command's agent arguments take a prefix or a name.
		PersistentPreRunE: resolveAgentArgs,
	}
	root.PersistentFlags().BoolVarP(&e.quiet, "quiet", "q", false, "print no line saying what a command did (data and errors still print)")
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w\nrun '%s --help' for usage", err, c.CommandPath())
	})
	root.AddCommand(capsuleCmd(e), journalCmd(e), demoCmd(e), nodeCmd(e), peerCmd(e), statusCmd(e), syncCmd(e),
		migrateCmd(e), holderCmd(e), simnetCmd(e), nemesisCmd(e), renderCmd(e), benchCmd(e), modelCmd(e), secretCmd(e),
		sessionCmd(e), turnCmd(e), memoryCmd(e), mcpCmd(e), uiCmd(e), actionsCmd(e), answerCmd(e, "approve", true), answerCmd(e, "deny", false), respondCmd(e),
		idCmd(e), versionCmd(e), memberCmd(e), environmentHelp())
	nameArgs(root)
	completions(root)
	addExamples(root)
	root.Version = version()
	root.SetVersionTemplate("tern {{.Version}}\n")
	return root
}

// showHelp is the action of a command that only groups others: bare, it
// prints its help; with an unknown subcommand, groupArgs refuses it.
func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// groupArgs refuses an unknown subcommand of a command that only groups
// others, suggesting the nearest ones (cobra does so for tern's own).
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return fmt.Errorf("%s\nrun '%s --help' for usage", msg, cmd.CommandPath())
}

// nameArgs makes every command's argument errors name what is missing or
// extra, from its usage line, and point to --help, instead of cobra's
// "accepts 1 arg(s), received 0".
func nameArgs(c *cobra.Command) {
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			if err == nil || strings.HasPrefix(err.Error(), "unknown command") && cmd.HasSubCommands() {
				return err
			}
			names := argNames(cmd.Use)
			what := fmt.Sprintf("got %d arguments", len(args))
			switch {
			case len(args) < len(names):
				what = "missing " + strings.Join(names[len(args):], " and ")
			case len(args) > len(names) && !strings.Contains(cmd.Use, "..."):
				what = fmt.Sprintf("too many arguments (%q and after)", args[len(names)])
			}
			return fmt.Errorf("%s: %s\nusage: %s\nrun '%s --help' for more", strings.TrimPrefix(cmd.CommandPath(), "tern "), what, cmd.UseLine(), cmd.CommandPath())
		}
	}
	for _, sub := range c.Commands() {
		nameArgs(sub)
	}
}

// argNames are the positional arguments a usage line names before its
// first optional part: "turn AGENT MESSAGE [--session S]" → AGENT, MESSAGE.
func argNames(use string) []string {
	var names []string
	for _, f := range strings.Fields(use)[1:] {
		if strings.HasPrefix(f, "[") || strings.HasPrefix(f, "-") {
			break
		}
		names = append(names, strings.TrimSuffix(f, "..."))
	}
	return names
}

// ours reports, for the capsules a command reads here, which machines are
// this person's: this machine and the paired peers of $TERN_HOME. Their
// acceptance of an agent.json counts (capsule.TrustedAgent).
func (e *env) ours() (func(machine string) bool, error) {
	home, err := node.Home()
	if err != nil {
		return nil, err
	}
	id, err := node.LoadIdentity(home)
	if err != nil {
		return nil, err
	}
	peers, err := node.LoadPeers(home)
	if err != nil {
		return nil, err
	}
	self := id.Machine()
	return func(m string) bool {
		if m == self {
			return true
		}
		p, err := peer.Decode(m)
		return err == nil && peers.Allowed(p)
	}, nil
}
