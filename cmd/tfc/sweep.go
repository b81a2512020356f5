package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"tfc/contracts/sweep"
)

func init() {
	var file, testdata, out string
	c := &cobra.Command{
		Use:   "sweep --out DIR [NAME...]",
		Short: "Write the config sweep's tiny random checkpoints (all, or those named)",
		Long: "sweep writes each checkpoint of testdata/sweep/sweep.json into DIR/NAME: the family fixture's\n" +
			"side files, its config.json with the sweep's values merged in, weights from a seeded generator\n" +
			"and the chats' pictures, the same bytes on every machine. DIR/NAME/sweep.json holds the config's\n" +
			"entry, its chats and the sha256 of every file drawn, for tools/oracle/sweep.py.",
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := sweep.Load(file)
			if err != nil {
				return err
			}
			configs := f.Configs
			if len(args) > 0 {
				configs = nil
				for _, name := range args {
					c, ok := f.Find(name)
					if !ok {
						return fmt.Errorf("%s has no config %q", file, name)
					}
					configs = append(configs, c)
				}
			}
			for _, c := range configs {
				dir := filepath.Join(out, c.Name)
				sums, err := f.Write(c, testdata, dir)
				if err != nil {
					return fmt.Errorf("%s: %w", c.Name, err)
				}
				cases := map[string]sweep.Case{}
				for _, name := range c.Cases {
					cases[name] = f.Cases[name]
				}
				data, err := json.MarshalIndent(map[string]any{"config": c, "cases": cases, "sha256": sums}, "", " ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, "sweep.json"), data, 0o644); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%s  %s\n", sums["model.safetensors"], dir)
			}
			return nil
		},
	}
	c.Flags().StringVar(&file, "file", "testdata/sweep/sweep.json", "the sweep's definition")
	c.Flags().StringVar(&testdata, "testdata", "testdata", "the folder holding the family fixtures")
	c.Flags().StringVar(&out, "out", "", "where to write the checkpoints")
	c.MarkFlagRequired("out")
	addCommand(c)
}
