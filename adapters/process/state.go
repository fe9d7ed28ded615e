package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile"
)

// The files of a launch's state directory,
// <WorkRoot>/.state/<kind>/<id>/<hash of the launch key>.
const (
	// stateDirName is the directory under WorkRoot holding the state
	// directories; no run kind is named like it.
	stateDirName = ".state"
	// launchFile is the launch's record, written by the runtime before it
	// starts the supervisor.
	launchFile = "launch.json"
	// lockFile is held locked (flock) by the supervisor while it lives.
	lockFile = "lock"
	// agentFile is written by the supervisor once the agent started.
	agentFile = "agent.json"
	// exitFile is written by the supervisor when the agent ended.
	exitFile = "exit.json"
	// releasedFile marks a launch its runtime let go.
	releasedFile = "released"
)

// launchRecord is launch.json: which run's launch the directory holds.
type launchRecord struct {
	Kind    reconcile.RunKind `json:"kind"`
	ID      string            `json:"id"`
	Key     string            `json:"key"`
	Started time.Time         `json:"started"`
}

// agentRecord is agent.json: the supervisor's pid (its process group and
// session) and the agent's.
type agentRecord struct {
	Pid      int `json:"pid"`
	AgentPid int `json:"agent_pid"`
}

// exitRecord is exit.json: how the agent ended.
type exitRecord struct {
	Code  int       `json:"code"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// stateDir is the state directory of ref's launch with key.
func (r *Runtime) stateDir(ref reconcile.RunRef, key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return filepath.Join(r.cfg.WorkRoot, stateDirName, safeName(string(ref.Kind)), safeName(ref.ID), fmt.Sprintf("%016x", h.Sum64()))
}

// writeJSON writes v to dir/name atomically (a temporary file renamed).
func writeJSON(dir, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name))
}

// readJSON reads dir/name into v; a missing file is fs.ErrNotExist.
func readJSON(dir, name string, v any) error {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, name), err)
	}
	return nil
}

// exists reports whether dir/name exists.
func exists(dir, name string) bool {
	_, err := os.Stat(filepath.Join(dir, name))
	return err == nil
}

// supervised reports whether the supervisor of the launch in dir still
// runs: it holds the lock of lockFile until it exits (the kernel drops
// it then, even on SIGKILL). A pid read from agent.json is signalled only
// while this holds, so a pid the system reused is never signalled.
func supervised(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return false
	}
	return errors.Is(err, syscall.EWOULDBLOCK)
}

// signalGroup sends sig to the process group of the launch in dir while
// its supervisor runs; it reports whether it sent it.
func signalGroup(dir string, sig syscall.Signal) bool {
	var a agentRecord
	if readJSON(dir, agentFile, &a) != nil || a.Pid <= 1 || !supervised(dir) {
		return false
	}
	return syscall.Kill(-a.Pid, sig) == nil
}

// ended reads how the agent of the launch in dir ended: exit.json, or,
// when the supervisor died without writing it, lost.
func ended(dir string) (code int, errText string, lost bool) {
	var e exitRecord
	if err := readJSON(dir, exitFile, &e); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return -1, "the agent's supervisor ended without recording an exit status (killed, or the machine restarted)", true
		}
		return -1, "unreadable exit status: " + err.Error(), true
	}
	return e.Code, e.Error, false
}

// launches lists the state directories under root, by run.
func launches(root string) (map[reconcile.RunRef][]string, error) {
	dirs, err := filepath.Glob(filepath.Join(root, stateDirName, "*", "*", "*", launchFile))
	if err != nil {
		return nil, err
	}
	out := map[reconcile.RunRef][]string{}
	for _, f := range dirs {
		dir := filepath.Dir(f)
		var l launchRecord
		if err := readJSON(dir, launchFile, &l); err != nil {
			continue
		}
		ref := reconcile.RunRef{Kind: l.Kind, ID: l.ID}
		out[ref] = append(out[ref], dir)
	}
	return out, nil
}
