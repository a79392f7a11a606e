// Package bubble runs code inside testing/synctest bubbles from a program
// that is not a test: tern simnet --layer node runs real nodes in a bubble,
// whose fake clock and Wait make a seed's run a function of the seed. A
// bubble needs a *testing.T, which only the testing package makes; Exit
// has it make one, through testing.Main, which the testing package keeps
// for programs that drive tests themselves.
package bubble

import (
	"flag"
	"os"
	"testing"
	"testing/synctest"
)

// In runs f inside a new bubble and returns when f and every goroutine it
// started have returned. It is safe for concurrent use.
type In func(f func())

// Exit calls run with an In, then exits the process with run's result. It
// never returns. The testing package prints nothing of its own.
func Exit(run func(in In) int) {
	testing.Init()
	flag.CommandLine.Parse(nil) // testing.Main must not parse the program's arguments
	testing.Main(func(string, string) (bool, error) { return true, nil },
		[]testing.InternalTest{{Name: "bubble", F: func(t *testing.T) {
			code := run(func(f func()) { synctest.Test(t, func(*testing.T) { f() }) })
			os.Exit(code)
		}}}, nil, nil)
	os.Exit(2) // not reached: the test exits
}
