package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"tfc/compiler/audit"
)

func init() {
	var o audit.Options
	c := &cobra.Command{
		Use:   "audit [--targets gfx1030,gfx90a,...] [FILES...]",
		Short: "compile HIP kernels for AMD targets and check their registers, LDS and scratch against the targets' limits",
		Long: "audit compiles each HIP file (default kernels/gen/*.hip) with clang++-19 for each target and prints, per kernel\n" +
			"and target, VGPRs, AGPRs, SGPRs, LDS, scratch and wave size from the code object. It exits 1 when a kernel\n" +
			"breaks a limit (threads per block, LDS per workgroup, registers) or uses scratch.\n" +
			"Default targets: " + strings.Join(audit.DefaultTargets, ",") + " (gfx1100 and gfx942 are skipped with a note\n" +
			"when no device library has them; .ci/hip-deps.sh installs what the audit needs).",
		RunE: func(cmd *cobra.Command, files []string) error {
			if len(files) == 0 {
				var err error
				if files, err = filepath.Glob("kernels/gen/*.hip"); err != nil {
					return err
				}
				o.Include = append(o.Include, "kernels")
				if len(files) == 0 {
					return fmt.Errorf("no kernels/gen/*.hip here; run tfc audit from the repository root or name the files")
				}
			}
			rep, err := audit.Run(cmd.Context(), files, o)
			if err != nil {
				return err
			}
			if err := rep.Print(cmd.OutOrStdout()); err != nil {
				return err
			}
			if rep.Failed() {
				return exitCode(1)
			}
			return nil
		},
	}
	c.Flags().StringSliceVar(&o.Targets, "targets", nil, "AMD targets to compile for (default "+strings.Join(audit.DefaultTargets, ",")+")")
	c.Flags().StringSliceVar(&o.DeviceLibs, "device-libs", nil, "folders of AMD device library bitcode, searched first")
	c.Flags().StringSliceVar(&o.Include, "include", nil, "folders of the headers the files include, besides their own (kernels/ is added for the default files)")
	c.Flags().StringVar(&o.Clang, "clang", "", "clang++ with HIP support (default clang++-19)")
	c.Flags().StringVar(&o.Readelf, "readelf", "", "llvm-readelf (default llvm-readelf-19)")
	addCommand(c)
}
