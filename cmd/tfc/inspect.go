package main

import (
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"tfc/runtime/engine"
	"tfc/runtime/model"
)

func init() {
	var context, parallel, rows int
	c := &cobra.Command{
		Use:   "inspect DIR",
		Short: "Check a checkpoint against its family and show what serving it needs",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ck, fam, bound, err := engine.Validate(args[0])
			if err != nil {
				return err
			}
			defer ck.Close()
			w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintf(w, "checkpoint\t%s\n", ck.Dir)
			fmt.Fprintf(w, "family\t%s (%s)\n", fam.Name, fam.Graph)
			fmt.Fprintf(w, "model_type\t%s %v\n", ck.ModelType(), ck.Architectures())
			if ck.Generation != nil {
				fmt.Fprintf(w, "eos ids\t%v\n", ck.Generation.EOS)
			}
			fmt.Fprintln(w, "\nconfig\tvalue\tfrom")
			for _, v := range bound.Values() {
				fmt.Fprintf(w, "%s\t%v\t%s\n", v.Name, v.Value, readFrom(ck.Config, v.Path))
			}
			fmt.Fprintln(w, "\ntensor\tshape\tdtype\tfile\tcheck")
			for _, s := range bound.Manifest() {
				t, err := ck.Tensor(s.Name)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%s\t%v\t%v\t%s\tok\n", s.Name, t.Shape, t.DType, t.File)
			}
			l := model.Limits{Context: context, Parallel: parallel, Rows: rows, PageSize: 16, Patches: 16384}
			plan := bound.Plan(l)
			fmt.Fprintf(w, "\nweights\t%s\t(%d tensors, %d bytes as stored)\n", human(ck.TotalBytes()), len(bound.Manifest()), ck.TotalBytes())
			fmt.Fprintf(w, "at context %d, parallel %d, rows %d:\n", context, parallel, rows)
			for _, b := range plan.Buffers {
				fmt.Fprintf(w, "  %s\t%s\n", b.Name, human(b.Bytes))
			}
			fmt.Fprintf(w, "  kv cache\t%s\n  activations\t%s\n  weights on device\t%s\n  total\t%s\n",
				human(plan.KVCache), human(plan.Activations), human(plan.Weights), human(plan.KVCache+plan.Activations+plan.Weights))
			return w.Flush()
		},
	}
	c.Flags().IntVar(&context, "context", 4096, "tokens per sequence")
	c.Flags().IntVar(&parallel, "parallel", 1, "sequences served at once")
	c.Flags().IntVar(&rows, "rows", 512, "rows per forward round")
	addCommand(c)
}

// readFrom names where a bound value came from: the first of its config.json paths the checkpoint
// has, "default" when it has none of them, or the formula of a derived value.
func readFrom(cfg interface{ Has(path string) bool }, paths string) string {
	if strings.HasPrefix(paths, "=") {
		return paths
	}
	for _, p := range strings.Split(paths, "|") {
		if cfg.Has(p) {
			return p
		}
	}
	return "default (none of " + paths + ")"
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
