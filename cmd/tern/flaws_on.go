//go:build ternflaws

package main

import (
	"fmt"
	"os"

	"github.com/tern-dev/tern/internal/flaws"
	"github.com/tern-dev/tern/node"
)

// A tern built with -tags ternflaws runs a deliberately broken variant of
// the protocols when TERN_FLAW names one, so that tern nemesis --flaw can
// show that its checker catches it on real processes. Release builds
// leave this file out: nothing in them reads TERN_FLAW.
func init() {
	flawsBuilt = true
	nodeFlaw = func(cfg *node.Config) error {
		name := os.Getenv("TERN_FLAW")
		if name == "" {
			return nil
		}
		f, ok := flaws.Parse(name)
		if !ok {
			return fmt.Errorf("TERN_FLAW=%q: not a flaw; unset it, or name one of internal/flaws", name)
		}
		cfg.Flaw = f
		return nil
	}
}
