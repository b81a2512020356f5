package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"tfc/runtime/checkpoint"
)

func init() {
	addCommand(&cobra.Command{
		Use:   "sources DIR",
		Short: "Print the sha256 of every non-weight file of a checkpoint directory",
		Long: "sources prints one line per file of the checkpoint directory that is not a weight file\n" +
			"(configs, tokenizer, chat template, processor config), as sha256sum does, so that\n" +
			"`tfc sources DIR > SHA256SUMS` can be checked later with `sha256sum -c` inside DIR.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, err := checkpoint.SourceFiles(args[0])
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			for _, f := range files {
				fmt.Fprintf(out, "%s  %s\n", f.SHA256, f.Name)
			}
			return nil
		},
	})
}
