package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// writeCLIReference writes the Markdown reference of every visible command
// under root: its use line, what it does, its examples and its flags
// (docs/cli.md; `make docs` rewrites it, a test keeps it current).
func writeCLIReference(w io.Writer, root *cobra.Command) error {
	var b strings.Builder
	b.WriteString("# CLI reference\n\nGenerated from the commands' own help by `make docs`; " +
		"a test fails when it is stale. `serve`, `migrate`, `bench` and the commands that reach a " +
		"server or a database (`--server`, `--dsn`) fill each flag not given from its " +
		"`RECONCILER_<FLAG>` environment variable (dashes as underscores): flag, then variable, then default.\n")
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" {
			return
		}
		fmt.Fprintf(&b, "\n## %s\n\n", c.CommandPath())
		if c.Short != "" {
			fmt.Fprintf(&b, "%s.\n\n", strings.TrimSuffix(c.Short, "."))
		}
		fmt.Fprintf(&b, "```\n%s\n```\n", c.UseLine())
		if c.Long != "" {
			fmt.Fprintf(&b, "\n%s\n", strings.TrimSpace(c.Long))
		}
		if c.Example != "" {
			fmt.Fprintf(&b, "\nExamples:\n\n```\n%s\n```\n", strings.TrimRight(c.Example, "\n"))
		}
		var rows []string
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			name := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			def := f.DefValue
			if def != "" && def != "[]" && def != "false" && def != "0" && def != "0s" {
				def = "`" + def + "`"
			} else {
				def = ""
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, strings.ReplaceAll(f.Usage, "|", `\|`), def))
		})
		if len(rows) > 0 {
			b.WriteString("\n| Flag | What it does | Default |\n|---|---|---|\n")
			b.WriteString(strings.Join(rows, "\n") + "\n")
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	_, err := io.WriteString(w, b.String())
	return err
}
