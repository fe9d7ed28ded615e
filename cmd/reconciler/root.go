package main

import (
	"github.com/spf13/cobra"
)

// newRootCmd builds the command tree. Each subcommand lives in its own file
// and is registered here.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "reconciler",
		Short: "Drive deployments and agent runs to their desired state",
		Long: "reconciler is a level-based reconciliation engine: it observes a frozen snapshot,\ntakes a pure decision and applies one typed action under compare-and-swap.\n\n" +
			"Commands that read or change the release chain, workflows and jobs talk to a running\n" +
			"server's API with --server URL and --token (RECONCILER_SERVER, RECONCILER_TOKEN),\n" +
			"or to the database directly with --dsn (offline and admin use).\n\n" + exitHelp,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version and `version` print the build; `versions` is the
		// deployment-version command group.
		Version: currentBuild().String(),
	}
	root.SetVersionTemplate("reconciler {{.Version}}\n")
	// Bad flags and unknown commands are usage errors: exit status 2.
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newDecideCmd(),
		newServeCmd(),
		newMigrateCmd(),
		newBenchCmd(),
		newCatalogCmd(),
		newVersionCmd(),
		newVersionsCmd(),
		newApproveCmd(),
		newWorkflowCmd(),
		newExplainCmd(),
		newTokenCmd(),
		newGetCmd(),
		newApplyCmd(),
		newDeleteCmd(),
		newJobsCmd(),
		newDeadCmd(),
		newQueueCmd(),
		newRunsCmd(),
		newAboutCmd(),
		newCompletionCmd(),
		newHealthcheckCmd(),
	// subcommands: one line each
	)
	root.CompletionOptions.DisableDefaultCmd = true // newCompletionCmd instead
	return root
}

// argsUsage wraps a cobra argument validator so that a wrong number of
// arguments is a usage error (exit status 2) like any other bad input.
func argsUsage(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := v(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}
