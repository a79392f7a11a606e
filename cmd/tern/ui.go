package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/tern-dev/tern/api"
)

func uiCmd(e *env) *cobra.Command {
	var noOpen bool
	c := &cobra.Command{
		Use:   "ui [--no-open]",
		Short: "Open the running node's web page, with a one-time login code",
		Long: "Asks the running node for a one-time login code and prints the page's address with it\n" +
			"(http://127.0.0.1:PORT/ui/login?code=…). The code works once, within five minutes, and\n" +
			"becomes a session cookie of that browser; the page then shows the node's agents, their\n" +
			"sessions and live turns, the actions they wait for, peers, sync and migrations. Where a\n" +
			"desktop is present it opens the address in the browser too (--no-open: only print it).",
		Example: "  tern ui\n  tern ui --no-open",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var code api.LoginCode
			if err := cl.Do(cmd.Context(), http.MethodPost, "/v1/ui/codes", nil, &code); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout, code.URL)
			if !noOpen {
				if opener := browserOpener(); opener != "" {
					if err := exec.Command(opener, code.URL).Start(); err == nil {
						e.done("opened it in the browser; the code works once, until %s", code.Expires.Local().Format("15:04:05"))
						return nil
					}
				}
			}
			e.done("open it in a browser on this machine; the code works once, until %s", code.Expires.Local().Format("15:04:05"))
			return nil
		},
	}
	c.Flags().BoolVar(&noOpen, "no-open", false, "print the address without opening a browser")
	return c
}

// browserOpener is the command that opens a URL on this desktop, or ""
// when there is no desktop to open it on.
func browserOpener() string {
	switch runtime.GOOS {
	case "darwin":
		return "open"
	case "windows":
		return ""
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return ""
	}
	if p, err := exec.LookPath("xdg-open"); err == nil {
		return p
	}
	return ""
}
