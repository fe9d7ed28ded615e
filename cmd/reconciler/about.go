package main

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// buildInfo is what the binary knows of its own build.
type buildInfo struct {
	// Version is the main module's version ("(devel)" for a build from a
	// work tree, v1.2.3 for go install ...@v1.2.3).
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from, Time its commit
	// time and Modified whether the work tree had uncommitted changes;
	// empty when the build recorded no VCS stamp (-buildvcs=false).
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
}

// linkedVersion is set at link time (-ldflags "-X
// main.linkedVersion=v1.2.3", as the Dockerfile does); when set it is the
// version shown, in place of the module version.
var linkedVersion string

// currentBuild is this binary's build: readBuildInfo with the linked
// version.
func currentBuild() buildInfo {
	return readBuildInfo(debug.ReadBuildInfo).linked(linkedVersion)
}

// linked returns b with version v, when v is set.
func (b buildInfo) linked(v string) buildInfo {
	if v != "" {
		b.Version = v
	}
	return b
}

// readBuildInfo reads the build from runtime/debug.ReadBuildInfo.
func readBuildInfo(read func() (*debug.BuildInfo, bool)) buildInfo {
	b := buildInfo{Version: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := read()
	if !ok {
		return b
	}
	b.GoVersion = bi.GoVersion
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one-line form `reconciler --version` prints.
func (b buildInfo) String() string {
	s := b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		s += " (" + rev
		if b.Modified {
			s += ", modified"
		}
		s += ")"
	}
	return s + " " + b.GoVersion + " " + b.Platform
}

// newAboutCmd reports the build. (`reconciler version` creates deployment
// versions; the build's version is `reconciler --version` or this.)
func newAboutCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "about",
		Short: "Show this binary's build: module version, VCS revision, Go version",
		Long: `about reports the build of this binary, read from the build information Go
embeds (runtime/debug.ReadBuildInfo): the module version, the VCS revision and
commit time it was built from, whether the tree was modified, the Go version
and the platform. reconciler --version prints the same on one line.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			b := currentBuild()
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(b)
			}
			fmt.Fprintf(out, "version:  %s\nrevision: %s\ntime:     %s\nmodified: %t\ngo:       %s\nplatform: %s\n",
				b.Version, orNone(b.Revision), orNone(b.Time), b.Modified, b.GoVersion, b.Platform)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "(none recorded)"
	}
	return s
}
