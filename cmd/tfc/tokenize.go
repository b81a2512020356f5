package main

import (
	"bufio"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"tfc/runtime/tokenizer"
)

func init() {
	var modelDir string
	cmd := &cobra.Command{
		Use:   "tokenize --model DIR [TEXT | -]",
		Short: "Print the token ids of TEXT as a JSON array; with -, read {\"text\": ...} lines and write {\"ids\": [...]} lines",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			tok, err := tokenizer.Load(modelDir)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(args) == 0 || args[0] != "-" {
				text := ""
				if len(args) == 1 {
					text = args[0]
				}
				return json.NewEncoder(out).Encode(nonNil(tok.Encode(text)))
			}
			in := bufio.NewScanner(cmd.InOrStdin())
			in.Buffer(make([]byte, 1<<20), 1<<30)
			w := bufio.NewWriter(out)
			defer w.Flush()
			enc := json.NewEncoder(w)
			for n := 1; in.Scan(); n++ {
				var line struct {
					Text *string `json:"text"`
				}
				if err := json.Unmarshal(in.Bytes(), &line); err != nil || line.Text == nil {
					return fmt.Errorf("stdin line %d is not a JSON object with a string \"text\" field", n)
				}
				if err := enc.Encode(struct {
					IDs []int `json:"ids"`
				}{nonNil(tok.Encode(*line.Text))}); err != nil {
					return err
				}
			}
			return in.Err()
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "checkpoint directory holding tokenizer.json")
	cmd.MarkFlagRequired("model")
	addCommand(cmd)
}

// nonNil makes an empty id list print as [] rather than null.
func nonNil(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}
