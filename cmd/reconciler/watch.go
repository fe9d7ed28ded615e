package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/reconcilerhq/reconciler/api/client"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// watch is a list command's --watch: after the list, it prints the
// changes of the kinds the list shows as they come (GET /api/v1/events),
// until interrupted.
type watch struct {
	on    bool
	kinds []ports.ChangeKind
	// workspace is passed to the stream; keep drops changes the list's
	// other filters would not show (nil: none dropped).
	workspace string
	keep      func(*ports.Change) bool
}

// bind adds --watch to cmd.
func (w *watch) bind(cmd *cobra.Command, kinds ...ports.ChangeKind) {
	w.kinds = kinds
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	cmd.Flags().BoolVarP(&w.on, "watch", "w", false, "after the list, print each change ("+strings.Join(names, ", ")+
		") as it comes, one a line (-o json: one JSON object a line), until interrupted")
}

// start opens the stream when --watch is set, before the list is read, so
// no change made after the list is missed; the returned function prints
// the changes from then on, until interrupted. Without --watch it does
// nothing.
func (w *watch) start(cmd *cobra.Command, ctx context.Context, c *client.Client) func(output string) error {
	if !w.on {
		return func(string) error { return nil }
	}
	changes := make(chan ports.Change, 256)
	opened := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		defer close(changes)
		f := client.EventFilter{Kinds: w.kinds, Workspace: w.workspace, OnOpen: func() { once.Do(func() { close(opened) }) }}
		done <- c.Events(ctx, f, -1, func(ch ports.Change) error {
			select {
			case changes <- ch:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	select {
	case <-opened:
	case err := <-done:
		// Refused (or interrupted) before it opened: said once the list is
		// printed.
		done <- err
	}
	return func(output string) error {
		out := cmd.OutOrStdout()
		for ch := range changes {
			if w.keep != nil && !w.keep(&ch) {
				continue
			}
			if err := printChange(out, output, &ch); err != nil {
				return err
			}
		}
		err := <-done
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil // interrupted: the watch is over
		}
		return err
	}
}

// printChange prints one change as -o asks: a line of text, or a JSON
// object (json), or a YAML document (yaml).
func printChange(w io.Writer, output string, ch *ports.Change) error {
	switch output {
	case "json":
		b, err := json.Marshal(ch)
		if err != nil {
			return fmt.Errorf("encode change: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	case "yaml":
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		_, err := structured(w, output, ch)
		return err
	}
	_, err := fmt.Fprintf(w, "%s  %s  %s  %s\n", ts(ch.At), ch.Kind, ch.Object, changeDetail(ch.Data))
	return err
}

// changeDetail renders a change's data as key=value pairs in key order.
func changeDetail(data json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return string(data)
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}

// targetKeep keeps the changes of targets (their key, or the target_key of
// a job's data) in the deployment, environment and resource given.
func targetKeep(deployment, environment, resource string) func(*ports.Change) bool {
	if deployment == "" && environment == "" && resource == "" {
		return nil
	}
	return func(ch *ports.Change) bool {
		key := ch.Object
		var d struct {
			TargetKey string `json:"target_key"`
		}
		if json.Unmarshal(ch.Data, &d) == nil && d.TargetKey != "" {
			key = d.TargetKey
		}
		t, err := release.ParseTargetKey(key)
		return err == nil && (deployment == "" || t.DeploymentID == deployment) &&
			(environment == "" || t.EnvironmentID == environment) && (resource == "" || t.ResourceID == resource)
	}
}
