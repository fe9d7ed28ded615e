package process

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"
)

// SuperviseArg is the hidden first argument that makes the reconciler
// binary the supervisor of one agent (Supervise); Config.Supervisor names
// the binary.
const SuperviseArg = "agent-supervise"

// The file descriptors a runtime hands its supervisor: the state
// directory's lock, taken, and the write end of the pipe it answers the
// start on.
const (
	lockFD  = 3
	readyFD = 4
)

// Supervise is the supervisor of one agent process: the program
// Config.Supervisor runs, with args STATE_DIR COMMAND [ARG...], in the
// agent's working directory, environment and session. It holds the lock
// its runtime handed it on descriptor 3 while it lives, starts COMMAND in
// its own process group (a release signals both), says "ok" (or why the
// start failed) on descriptor 4, writes agent.json (its pid and the
// agent's) before that, and exit.json (the agent's exit code: 128+N for
// signal N) when the agent ends, then exits with that code. It swallows
// SIGTERM, SIGINT and SIGHUP, which its agent handles; SIGKILL ends both.
// The agent inherits neither descriptor. It returns the exit status.
func Supervise(args []string) int {
	ready := os.NewFile(readyFD, "ready")
	if len(args) < 2 || ready == nil {
		fmt.Fprintln(os.Stderr, "reconciler "+SuperviseArg+": started by the process runtime only (STATE_DIR COMMAND [ARG...])")
		return 2
	}
	dir := args[0]
	syscall.CloseOnExec(lockFD)
	syscall.CloseOnExec(readyFD)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	cmd := exec.Command(args[1], args[2:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	fail := func(err error) int {
		fmt.Fprintf(ready, "error: %v\n", err)
		ready.Close()
		return 127
	}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	if err := writeJSON(dir, agentFile, agentRecord{Pid: os.Getpid(), AgentPid: cmd.Process.Pid}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fail(fmt.Errorf("state directory: %w", err))
	}
	fmt.Fprintln(ready, "ok")
	ready.Close()
	err := cmd.Wait()
	e := exitRecord{Code: cmd.ProcessState.ExitCode(), At: time.Now()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Code = 128 + int(ws.Signal())
	}
	if err != nil {
		e.Error = err.Error()
	}
	if err := writeJSON(dir, exitFile, e); err != nil {
		fmt.Fprintf(os.Stderr, "reconciler %s: exit status not recorded: %v\n", SuperviseArg, err)
	}
	return e.Code
}
