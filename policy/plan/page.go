package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// Summary counts what a diff does, over all its targets: what a paged
// plan says before its first page.
type Summary struct {
	// Targets is how many targets the diff lists (every page together).
	Targets int `json:"targets"`
	// Created and Removed count the targets the change creates or removes.
	Created int `json:"created"`
	Removed int `json:"removed"`
	// Gated counts the targets on which a gating rule starts or stops
	// applying; Lifted is Lifted's length (rules taken off targets that
	// stay).
	Gated  int `json:"gated"`
	Lifted int `json:"lifted"`
	// Moved counts the targets whose desired release changes (decided
	// diffs only: DesiredChange.Changed).
	Moved int `json:"moved"`
	// Digest fingerprints the whole plan (each target's key, whether it
	// is created or removed, its rules and its releases before and after):
	// pages read with equal digests are pages of one plan.
	Digest string `json:"digest"`
}

// Summary counts d's targets.
func (d Diff) Summary() Summary {
	s := Summary{Targets: len(d.Targets), Lifted: len(d.Lifted())}
	for i := range d.Targets {
		t := &d.Targets[i]
		if t.Created {
			s.Created++
		}
		if t.Removed {
			s.Removed++
		}
		if len(t.Starts) > 0 || len(t.Stops) > 0 {
			s.Gated++
		}
		if t.Desired != nil && t.Desired.Changed() {
			s.Moved++
		}
	}
	s.Digest = d.digest()
	return s
}

// digest is Summary.Digest: what the plan decides, not how it words it
// (reasons may name times).
func (d Diff) digest() string {
	h := sha256.New()
	release := func(x *Desired) string {
		if x == nil {
			return "-"
		}
		return x.ReleaseID
	}
	for i := range d.Targets {
		t := &d.Targets[i]
		fmt.Fprintf(h, "%s %t %t\n", t.Key, t.Created, t.Removed)
		for _, r := range t.Starts {
			fmt.Fprintf(h, "+%s\n", r)
		}
		for _, r := range t.Stops {
			fmt.Fprintf(h, "-%s\n", r)
		}
		if t.Desired != nil {
			fmt.Fprintf(h, "%s>%s\n", release(t.Desired.Before), release(t.Desired.After))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// Page is the targets of d whose key sorts after after ("" : from the
// first), at most limit of them (limit < 1: all), and the key to continue
// after ("" when none is left). Targets are sorted by key, so a page is
// deterministic over the target order: the same diff gives the same pages.
func (d Diff) Page(after string, limit int) (Diff, string) {
	i, _ := slices.BinarySearchFunc(d.Targets, after, func(t Target, k string) int { return strings.Compare(t.Key, k) })
	for i < len(d.Targets) && d.Targets[i].Key <= after {
		i++
	}
	rest := d.Targets[i:]
	if limit < 1 || len(rest) <= limit {
		return Diff{Targets: slices.Clip(rest)}, ""
	}
	page := slices.Clip(rest[:limit])
	return Diff{Targets: page}, page[limit-1].Key
}
