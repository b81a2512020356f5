package audit

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// Print writes the report as a table, one row per kernel and target, then the findings and notes.
func (r *Report) Print(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "file\tkernel\ttarget\twave\tVGPRs\tAGPRs\tSGPRs\tLDS bytes\tscratch\tthreads\tstatus\t")
	for _, k := range r.Kernels {
		status := "ok"
		if len(k.Findings) > 0 {
			status = fmt.Sprintf("%d finding(s)", len(k.Findings))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n",
			k.File, k.Name, k.Target, k.Wave, k.VGPRs, k.AGPRs, k.SGPRs, k.LDS, k.Scratch, k.MaxThreads, status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, k := range r.Kernels {
		for _, f := range k.Findings {
			fmt.Fprintf(w, "%s: %s on %s: %s\n", k.File, k.Name, k.Target, f)
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	return nil
}
