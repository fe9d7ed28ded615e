package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/reconcile"
)

// newDecideCmd replays recorded snapshots through the pure decision
// functions.
func newDecideCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "decide FILE... | -",
		Short: "Replay a recorded snapshot and print the decision",
		Long: `decide reads a recorded snapshot (the JSON the engine logs at debug level as
reconcile.snapshot, format in docs/snapshot-format.md), runs the pure decision
function of its kind and prints the one action it takes, with its reason.

A release target's recorded decision (kind release-target: the snapshot of an
entry of explain --history, format in docs/target-decision-format.md) is
replayed through the desired-release choice (policy.Choose) and prints the
version it chooses, with the reasons newer versions wait.

Use - to read the snapshot from standard input. Bad input exits with status 2
and a message naming the field (and its line and column).`,
		Example: `  reconciler decide testdata/snapshots/repo-queued-capacity.json
  reconciler decide --output text testdata/snapshots/*.json
  reconciler decide - < snapshot.json
  reconciler explain web:prod:eu-1 --history -o json | jq '.[0].snapshot' | reconciler decide -`,
		Args: argsUsage(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "json" && output != "text" {
				return usagef("--output: want json or text, got %q", output)
			}
			// Every snapshot is replayed; a bad one is reported on stderr
			// and the others still print. The first failure decides the
			// exit status.
			out := cmd.OutOrStdout()
			var first error
			for _, name := range args {
				err := decideOne(cmd.InOrStdin(), out, name, output, len(args) > 1)
				if err == nil {
					continue
				}
				if first == nil {
					first = err
				}
				if len(args) > 1 {
					fmt.Fprintln(cmd.ErrOrStderr(), "reconciler:", err)
				}
			}
			if first != nil && len(args) > 1 {
				return decideFailed{first}
			}
			return first
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output format: json (one object per snapshot) or text (one line)")
	return cmd
}

// decideFailed is the first failure of a multi-file decide whose failures
// were each reported already: main prints only a summary line for it.
type decideFailed struct{ err error }

func (e decideFailed) Error() string { return "some snapshots could not be replayed (see above)" }
func (e decideFailed) Unwrap() error { return e.err }

// ExitCode is the exit status of the first failure.
func (e decideFailed) ExitCode() int {
	var ec exitCoder
	if errors.As(e.err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

// decideOne replays the snapshot in file name (- for stdin) and prints its
// decision in the output format; prefix puts the file name before a text
// line.
func decideOne(stdin io.Reader, out io.Writer, name, output string, prefix bool) error {
	data, err := readInput(stdin, name)
	if err != nil {
		return usagef("read snapshot: %v", err)
	}
	if isTargetSnapshot(data) {
		return decideTarget(out, name, data, output, prefix)
	}
	s, err := reconcile.DecodeSnapshot(data)
	if err != nil {
		if reconcile.ErrSnapshot(err) {
			return usagef("%s: %v", name, err)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	a := reconcile.Decide(s)
	d, err := reconcile.NewDecision(s.Ref(), a)
	if err != nil {
		return err
	}
	if output == "text" {
		line := textDecision(d)
		if prefix {
			line = name + ": " + line
		}
		_, err = fmt.Fprintln(out, line)
		return err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}

// textDecision renders "kind/id: type k=v ... (reason)" with the action's
// fields in a stable order.
func textDecision(d reconcile.Decision) string {
	var fields map[string]any
	dec := json.NewDecoder(bytes.NewReader(d.Action))
	dec.UseNumber()
	_ = dec.Decode(&fields)
	typ, _ := fields["type"].(string)
	delete(fields, "type")
	delete(fields, "reason")
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s: %s", d.Kind, d.ID, typ)
	for _, k := range keys {
		v := fields[k]
		switch v := v.(type) {
		case string:
			fmt.Fprintf(&b, " %s=%s", k, v)
		default:
			j, _ := json.Marshal(v)
			fmt.Fprintf(&b, " %s=%s", k, j)
		}
	}
	fmt.Fprintf(&b, " (reason: %s)", d.Reason)
	return b.String()
}
