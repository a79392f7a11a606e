package secrets

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/term"
)

// TerminalPrompt returns a Prompt that writes its question to out and
// reads one line from the terminal in, without echo; nil when in is not a
// terminal, so that a command reading a pipe never waits for a person.
func TerminalPrompt(in *os.File, out io.Writer) Prompt {
	if in == nil || !term.IsTerminal(int(in.Fd())) {
		return nil
	}
	return func(question string) (string, error) {
		fmt.Fprint(out, question)
		b, err := term.ReadPassword(int(in.Fd()))
		fmt.Fprintln(out)
		if err != nil {
			return "", fmt.Errorf("read from the terminal: %w", err)
		}
		return string(b), nil
	}
}
