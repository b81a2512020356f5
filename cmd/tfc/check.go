package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"tfc/compiler/check"
)

func init() {
	addCommand(&cobra.Command{
		Use:   "check FILE...",
		Short: "Check .graph files and print every diagnostic",
		Long: "check parses and checks each .graph file: names, config bindings, weights, symbolic shapes " +
			"and dtypes. It prints every diagnostic as file:line:col: message with the source line and a " +
			"caret, and exits 1 when there is any; it prints nothing for clean files.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			failed := false
			for _, name := range args {
				src, err := os.ReadFile(name)
				if err != nil {
					return err
				}
				if _, diags := check.Source(name, string(src)); len(diags) > 0 {
					fmt.Fprint(cmd.ErrOrStderr(), diags.Format(string(src)))
					failed = true
				}
			}
			if failed {
				return exitCode(1)
			}
			return nil
		},
	})
}
