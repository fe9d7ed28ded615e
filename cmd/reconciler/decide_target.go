package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/policy"
)

// targetReplay is what decide prints for a release target's recorded
// decision.
type targetReplay struct {
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// How is override's (force-deploy, rollback), newest-allowed when
	// Choose chose, or no-release.
	How         string    `json:"how"`
	VersionID   string    `json:"version_id,omitempty"`
	Tag         string    `json:"tag,omitempty"`
	Reasons     []string  `json:"reasons,omitempty"`
	NextCheckAt time.Time `json:"next_check_at,omitzero"`
	Examined    int       `json:"examined"`
}

// isTargetSnapshot reports whether data is an object whose kind is a
// release target's.
func isTargetSnapshot(data []byte) bool {
	var head struct {
		Kind string `json:"kind"`
	}
	return json.Unmarshal(data, &head) == nil && head.Kind == policy.SnapshotKind
}

// decideTarget replays a release target's recorded decision and prints it
// in the output format.
func decideTarget(out io.Writer, name string, data []byte, output string, prefix bool) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var snap policy.ChooseSnapshot
	if err := dec.Decode(&snap); err != nil {
		return usagef("%s: %v", name, err)
	}
	ch, err := snap.Replay()
	if err != nil {
		return usagef("%s: %v", name, err)
	}
	r := targetReplay{Kind: snap.Kind, Target: snap.Target.Key(), How: "no-release", Reasons: ch.Reasons, NextCheckAt: ch.NextCheckAt, Examined: ch.Examined}
	if ch.Version != nil {
		r.How, r.VersionID, r.Tag = "newest-allowed", ch.Version.ID, ch.Version.Tag
		if snap.Override != nil {
			r.How = snap.Override.How
		}
	}
	if output == "text" {
		line := fmt.Sprintf("%s/%s: %s", r.Kind, r.Target, r.How)
		if r.Tag != "" {
			line += " " + r.Tag
		}
		if len(r.Reasons) > 0 {
			line += " (" + strings.Join(r.Reasons, "; ") + ")"
		}
		if prefix {
			line = name + ": " + line
		}
		_, err = fmt.Fprintln(out, line)
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", b)
	return err
}
