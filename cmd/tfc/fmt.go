package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"tfc/compiler/check"
	"tfc/compiler/syntax"
)

func init() {
	var write, diff bool
	c := &cobra.Command{
		Use:   "fmt [-w | -d] FILE...",
		Short: "Print .graph files in the canonical form",
		Long: "fmt prints each .graph file in the canonical form (comments kept); -w rewrites the files " +
			"that differ, -d prints a unified diff of what would change.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			for _, name := range args {
				src, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				out, err := syntax.FormatSource(name, string(src))
				if err != nil {
					// A file that does not parse is reported as tfc check would report it.
					_, diags := check.Source(name, string(src))
					fmt.Fprint(cmd.ErrOrStderr(), diags.Format(string(src)))
					failed = true
					continue
				}
				switch {
				case write:
					if string(out) != string(src) {
						if err := os.WriteFile(name, out, 0o644); err != nil {
							return err
						}
					}
				case diff:
					fmt.Fprint(cmd.OutOrStdout(), syntax.Diff(name, src, out))
				default:
					cmd.OutOrStdout().Write(out)
				}
			}
			if failed {
				return exitCode(1)
			}
			return nil
		},
	}
	c.Flags().BoolVarP(&write, "write", "w", false, "rewrite the files in place")
	c.Flags().BoolVarP(&diff, "diff", "d", false, "print a unified diff instead of the formatted file")
	addCommand(c)
}
