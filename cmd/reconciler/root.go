package main

import (
	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree. Each subcommand lives in its own file
// and is registered here.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "reconciler",
		Short:         "Drive deployments and agent runs to their desired state",
		Long:          "reconciler is a level-based reconciliation engine: it observes a frozen snapshot,\ntakes a pure decision and applies one typed action under compare-and-swap.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newDecideCmd(),
		newServeCmd(),
		newMigrateCmd(),
		newBenchCmd(),
	// subcommands: one line each
	)
	return root
}
