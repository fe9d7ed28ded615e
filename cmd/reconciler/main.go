// Command reconciler runs the reconciliation engine, replays recorded
// decisions and administers its store. Run `reconciler --help` for the
// subcommands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/reconcilerhq/reconciler/adapters/process"
)

// exitCoder is an error that carries the process exit status.
type exitCoder interface{ ExitCode() int }

// usageError marks bad input from the user: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }
func (e usageError) ExitCode() int { return 2 }

// usagef builds a usageError.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

func main() {
	// The process runtime runs each agent under this binary as its
	// supervisor (hidden: not a command for people).
	if len(os.Args) > 1 && os.Args[1] == process.SuperviseArg {
		os.Exit(process.Supervise(os.Args[2:]))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The first SIGINT/SIGTERM starts a graceful shutdown; a second one exits
	// at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		fmt.Fprintf(os.Stderr, "reconciler: %v: shutting down (send again to exit at once)\n", s)
		cancel()
		<-sigs
		os.Exit(130)
	}()
	err := newRootCmd().ExecuteContext(ctx)
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "reconciler:", err)
	os.Exit(exitStatus(err))
}
