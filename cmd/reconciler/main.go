// Command reconciler runs the reconciliation engine, replays recorded
// decisions and administers its store. Run `reconciler --help` for the
// subcommands.
//
// Invariants: Config: flag > `RECONCILER_*` > default; every duration and
// number flag has a range, checked as it is set (the error names the one
// flag or variable); one exit-status table (`exitStatus`: 0 ok, 1 error, 2
// bad input, 3 conflict, 4 not found, 5 unauthorized, 6 database not
// migrated); every file or stdin it reads is capped at 4 MiB (`readInput`);
// `TestBadInputCampaign` runs every command with an unknown flag, an
// unparsable value for each number, duration and boolean flag, surplus
// arguments, and bad files, choices and names: each exits 2 naming the flag,
// argument or field, none echoes an escape raw, and the database they were
// pointed at is unchanged row for row; commands that only read (`explain`,
// `workflow status`, `catalog list`/`get`) never migrate and exit 6 on an
// unmigrated database; `--insecure-no-auth` only on a loopback listener;
// client-only commands on `--dsn` serve the API in the process; every
// `--dsn` command that records a principal records `localPrincipal()`,
// `local:<operating-system user>` (no free-text `--user`/`--by`); a stand-in
// (the demo world, the recording code host) is logged (WARN) and shown in
// `/readyz?verbose`
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
