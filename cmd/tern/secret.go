package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/internal/secrets"
	"github.com/tern-dev/tern/node"
)

// maxSecretValue bounds a value read from standard input: a secret is a
// key or a token, not a file.
const maxSecretValue = 64 << 10

func secretCmd(e *env) *cobra.Command {
	c := &cobra.Command{
		Use:   "secret",
		Short: "Keep the secrets agents need (model API keys) on this machine, by name",
		Long: "Keeps secret values, such as model API keys, in this machine's OS keyring, or, where none\n" +
			"is reachable, in encrypted files in $TERN_HOME/secrets (password: $TERN_SECRETS_PASSWORD).\n" +
			"A capsule names a secret (key_secret in agent.json); the value never leaves this machine.\n" +
			"When neither holds a secret, tern reads the environment variable TERN_SECRET_<NAME>.\n" +
			"TERN_SECRETS_BACKEND=keyring|file|auto chooses the backend. No command prints a value.\n" +
			"docs/SECRETS.md has the details.",
		Args: groupArgs,
		RunE: showHelp,
	}
	c.AddCommand(secretSetCmd(e), secretListCmd(e), secretRmCmd(e))
	return c
}

func secretSetCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "set NAME",
		Example: "  tern secret set ANTHROPIC_KEY                      # typed without echo\n  printf %s \"$OPENAI_API_KEY\" | tern secret set OPENAI_KEY",
		Short:   "Store a secret: typed without echo on a terminal, else read from standard input",
		Long: "Stores the value of the secret NAME, replacing any it had. On a terminal it asks for the\n" +
			"value without echo; otherwise it reads standard input (one trailing newline is dropped):\n" +
			"  printf %s \"$OPENAI_API_KEY\" | tern secret set OPENAI_KEY\n" +
			"Names are 1 to 64 letters, digits and _, starting with a letter, case-insensitive\n" +
			"(stored upper-cased). It prints where the value went, never the value.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := secrets.CanonicalName(args[0])
			if err != nil {
				return secretFailure(err)
			}
			store, err := openSecrets(e)
			if err != nil {
				return err
			}
			value, err := readSecretValue(e, name)
			if err != nil {
				return err
			}
			if err := store.Set(name, value); err != nil {
				return secretFailure(err)
			}
			fmt.Fprintf(e.stdout, "stored %s in %s\n", name, store.Backend())
			return nil
		},
	}
}

func secretListCmd(e *env) *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the names of the stored secrets (never their values)",
		Long: "Prints the names of the secrets this machine stores, one per line, sorted. Secrets that only\n" +
			"an environment variable TERN_SECRET_<NAME> supplies are not listed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := openSecrets(e)
			if err != nil {
				return err
			}
			names, err := store.List()
			if err != nil {
				return secretFailure(err)
			}
			if asJSON {
				return json.NewEncoder(e.stdout).Encode(names)
			}
			if len(names) == 0 {
				fmt.Fprintf(e.stderr, "no secrets in %s\n", store.Backend())
			}
			for _, n := range names {
				fmt.Fprintln(e.stdout, n)
			}
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print one JSON list of names")
	return c
}

func secretRmCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a stored secret (exit 2 if it is not stored)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name, err := secrets.CanonicalName(args[0])
			if err != nil {
				return secretFailure(err)
			}
			store, err := openSecrets(e)
			if err != nil {
				return err
			}
			if err := store.Remove(name); err != nil {
				return secretFailure(err)
			}
			fmt.Fprintf(e.stdout, "removed %s from %s\n", name, store.Backend())
			return nil
		},
	}
}

// openSecrets opens this machine's store of secrets. It asks for the
// encrypted file's password on the terminal only when standard input is
// one and TERN_SECRETS_PASSWORD is not set.
func openSecrets(e *env) (*secrets.Store, error) {
	home, err := node.Home()
	if err != nil {
		return nil, err
	}
	s, err := secrets.Open(home, terminalPrompt(e))
	if err != nil {
		return nil, secretFailure(err)
	}
	return s, nil
}

// terminalPrompt asks on standard error and reads standard input without
// echo; nil when standard input is not a terminal.
func terminalPrompt(e *env) secrets.Prompt {
	f, ok := e.stdin.(*os.File)
	if !ok {
		return nil
	}
	return secrets.TerminalPrompt(f, e.stderr)
}

// readSecretValue reads the value of name from the terminal without echo,
// or else from standard input, without one trailing newline.
func readSecretValue(e *env, name string) (string, error) {
	if ask := terminalPrompt(e); ask != nil {
		v, err := ask(fmt.Sprintf("Value of %s (typing is hidden): ", name))
		if err != nil {
			return "", &exitError{exitFailed, err}
		}
		if strings.TrimSpace(v) == "" {
			return "", &exitError{exitBadInput, fmt.Errorf("no value typed for %s; nothing was stored", name)}
		}
		return v, nil
	}
	b, err := io.ReadAll(io.LimitReader(e.stdin, maxSecretValue+1))
	if err != nil {
		return "", &exitError{exitFailed, fmt.Errorf("read standard input: %w", err)}
	}
	if len(b) > maxSecretValue {
		return "", &exitError{exitBadInput, fmt.Errorf("standard input holds over %d KiB; a secret's value is a key or a token", maxSecretValue>>10)}
	}
	v := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if strings.TrimSpace(v) == "" {
		return "", &exitError{exitBadInput, fmt.Errorf("no value for %s on standard input: pipe it in (printf %%s \"$KEY\" | tern secret set %s), or run in a terminal to type it", name, name)}
	}
	return v, nil
}

// secretFailure gives a secrets error its exit code: 2 for bad input (a
// bad name or value, a secret that is not there, a bad
// TERN_SECRETS_BACKEND), 3 for anything else (no keyring and no password,
// a locked keyring, a wrong password): trying again, once that is fixed,
// may work.
func secretFailure(err error) error {
	if errors.Is(err, secrets.ErrInvalid) || errors.Is(err, secrets.ErrNotFound) {
		return &exitError{exitBadInput, err}
	}
	return &exitError{exitFailed, err}
}
