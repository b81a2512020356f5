// Command tfc compiles .graph model families and serves the checkpoints they describe.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// root is the tfc command; each subcommand registers itself from its own file with addCommand.
var root = &cobra.Command{
	Use:           "tfc",
	Short:         "tfc compiles vision-language model families from .graph files and serves them",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func addCommand(c *cobra.Command) { root.AddCommand(c) }

func main() {
	if err := root.Execute(); err != nil {
		var ec exitCode
		if asExit(err, &ec) {
			os.Exit(int(ec))
		}
		fmt.Fprintln(os.Stderr, "tfc:", err)
		os.Exit(1)
	}
}

// exitCode is an error that only sets the exit status; its command already printed what went wrong.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func asExit(err error, ec *exitCode) bool {
	e, ok := err.(exitCode)
	if ok {
		*ec = e
	}
	return ok
}
