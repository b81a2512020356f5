package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"tfc/runtime/chattemplate"
)

func init() {
	var modelDir, messagesPath, kwargs string
	var addGenerationPrompt bool
	cmd := &cobra.Command{
		Use:   "template --model DIR --messages FILE [--add-generation-prompt] [--kwargs JSON]",
		Short: "Render the checkpoint's chat template over a JSON array of messages and print the prompt",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			tmpl, err := chattemplate.Load(modelDir)
			if err != nil {
				return err
			}
			var messages []byte
			if messagesPath == "-" {
				messages, err = io.ReadAll(cmd.InOrStdin())
			} else {
				messages, err = os.ReadFile(messagesPath)
			}
			if err != nil {
				return err
			}
			o := chattemplate.Options{AddGenerationPrompt: addGenerationPrompt}
			if kwargs != "" {
				o.KwargsJSON = []byte(kwargs)
			}
			prompt, err := tmpl.RenderJSON(messages, o)
			if err != nil {
				return fmt.Errorf("%s: %w", messagesPath, err)
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), prompt)
			return err
		},
	}
	cmd.Flags().StringVar(&modelDir, "model", "", "checkpoint directory holding the chat template")
	cmd.Flags().StringVar(&messagesPath, "messages", "", `JSON file with [{"role": ..., "content": ...}, ...] ("-" reads stdin)`)
	cmd.Flags().BoolVar(&addGenerationPrompt, "add-generation-prompt", false, "end with the assistant turn's opening")
	cmd.Flags().StringVar(&kwargs, "kwargs", "", `extra template variables as a JSON object, e.g. '{"enable_thinking": false}'`)
	cmd.MarkFlagRequired("model")
	cmd.MarkFlagRequired("messages")
	addCommand(cmd)
}
