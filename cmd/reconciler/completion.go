package main

import (
	"github.com/spf13/cobra"
)

// newCompletionCmd writes a shell completion script with cobra's
// generators; the scripts complete subcommands and flags by asking the
// binary (its hidden __complete command).
func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "completion bash|zsh|fish",
		Short: "Write the shell completion script for bash, zsh or fish",
		Long: `completion writes a completion script for the shell to stdout, e.g.
  source <(reconciler completion bash)
  reconciler completion zsh > "${fpath[1]}/_reconciler"
  reconciler completion fish > ~/.config/fish/completions/reconciler.fish`,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args:      argsUsage(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, root := cmd.OutOrStdout(), cmd.Root()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return usagef("completion: unknown shell %q: want bash, zsh or fish", args[0])
		},
	}
}
