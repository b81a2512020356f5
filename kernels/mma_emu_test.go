package kernels

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"tfc/kernels/emutest"
)

// TestMMAEmulated runs the tensor-core GEMM of tfc_kernels.h (tfc_gemm_mma, CUDA only) on the
// CPU: testdata/mmaemu/tfc_hip.h stands in for the portability header, emulating ldmatrix and
// mma.sync from the PTX ISA's fragment layouts with a fiber for each GPU thread, and main.cpp
// checks the tiles and the fill layout against a float64 reference (see its comment), once for each setting of the
// small-row layout's knobs below (tfc_mma_gemm.h's TFC_ROWS_*; TFC_ROWS_NC only compiles here, as
// the host's load stands in for ld.global.nc; the fill layout's checks, which they do not touch,
// left out by EMU_ROWS_ONLY), once in BF16 precision, and once with the fill
// layout's BF16 tiles on wgmma (TFC_FILL_WGMMA; its fill checks alone, EMU_FILL_ONLY). It needs a C++20 compiler.
func TestMMAEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulation takes about half a minute a setting")
	}
	t.Parallel()
	for _, flags := range [][]string{
		nil,
		{"-DTFC_ROWS_PIPE=2", "-DTFC_ROWS_NC=1", "-DEMU_ROWS_ONLY"},
		{"-DTFC_ROWS_PIPE=3", "-DTFC_ROWS_TILE_CHUNKS=2", "-DTFC_ROWS_NC=2", "-DEMU_ROWS_ONLY"},
		{"-DTFC_BF16=1"},
		{"-DTFC_FILL_WGMMA=1", "-DEMU_FILL_ONLY"},
	} {
		name := strings.Join(flags, " ")
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runEmulated(t, "main.cpp", flags...)
		})
	}
}

// TestAttentionEmulated runs tfc_attention_spans the same way (testdata/mmaemu/attn.cpp): the
// tensor-core path CUDA takes, and the portable path (EMU_PORTABLE) other targets take, each in
// F32 and in BF16 precision.
func TestAttentionEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulation takes about two minutes")
	}
	t.Parallel()
	t.Run("cuda", func(t *testing.T) {
		t.Parallel()
		runEmulated(t, "attn.cpp")
	})
	t.Run("portable", func(t *testing.T) {
		t.Parallel()
		runEmulated(t, "attn.cpp", "-DEMU_PORTABLE")
	})
	t.Run("cuda bf16", func(t *testing.T) {
		t.Parallel()
		runEmulated(t, "attn.cpp", "-DTFC_BF16=1")
	})
	t.Run("portable bf16", func(t *testing.T) {
		t.Parallel()
		runEmulated(t, "attn.cpp", "-DEMU_PORTABLE", "-DTFC_BF16=1")
	})
}

// TestPagedAttentionEmulated runs tfc_attention_paged the same way (testdata/mmaemu/paged.cpp):
// the tensor-core cached attention CUDA takes in BF16 (TFC_PAGED_MMA; the backend turns it on)
// precision, on the CUDA-core kernel's grid (1) and on its own (2), and the CUDA-core kernel it takes by default (its layout for more than 8 rows) in
// both precisions and with ranges of at least 64 keys (TFC_PAGED_MINPER) and two query heads a
// decode row's cluster (TFC_PAGED_HEADS), over decode rows,
// prompt chunks and contexts of several rounds of chunks, each row's bits checked across launches
// and against the layout of launches of at most 8 rows, whose blocks run as clusters.
func TestPagedAttentionEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulation takes a few minutes")
	}
	t.Parallel()
	for name, flags := range map[string][]string{
		"mma bf16":                     {"-DTFC_BF16=1", "-DTFC_PAGED_MMA=1"},
		"mma bf16 own grid":            {"-DTFC_BF16=1", "-DTFC_PAGED_MMA=2"},
		"warps bf16":                   {"-DTFC_BF16=1"},
		"warps f32":                    nil,
		"warps bf16 minper 64 heads 2": {"-DTFC_BF16=1", "-DTFC_PAGED_MINPER=64", "-DTFC_PAGED_HEADS=2"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			runEmulated(t, "paged.cpp", flags...)
		})
	}
}

// TestArgmaxEmulated runs tfc_block_argmax, the greedy pick of each logit row, the same way
// (testdata/mmaemu/argmax.cpp): picks against contracts.Argmax's rule, and its controls red.
func TestArgmaxEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulation takes a few seconds")
	}
	t.Parallel()
	runEmulated(t, "argmax.cpp", "-DEMU_PORTABLE")
}

// TestBlockSumEmulated runs tfc_block_sum, the norms' row sums, the same way
// (testdata/mmaemu/sum.cpp) on waves of 32 and of 64: the documented order's bits in every
// thread, the same for both waves, and the missing-barrier control red.
func TestBlockSumEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulation takes a few seconds")
	}
	t.Parallel()
	for _, wave := range []string{"32", "64"} {
		t.Run("wave "+wave, func(t *testing.T) {
			t.Parallel()
			runEmulated(t, "sum.cpp", "-DEMU_PORTABLE", "-DEMU_WAVE="+wave)
		})
	}
}

// TestAMDMatrixEmulated runs tfc_gemm_amd, the AMD matrix-core GEMM, the same way: on CDNA's MFMA
// with waves of 64 and on RDNA3's WMMA with waves of 32 (testdata/mmaemu/amd.cpp): products
// against a float64 reference, a row's bits in the full, mid and decode tiles, one term against
// three, specials and the controls.
func TestAMDMatrixEmulated(t *testing.T) {
	if testing.Short() {
		t.Skip("the emulation takes about a minute")
	}
	t.Parallel()
	for _, target := range []string{"MFMA", "WMMA"} {
		t.Run(target, func(t *testing.T) {
			t.Parallel()
			runEmulated(t, "amd.cpp", "-DEMU_"+target)
		})
	}
}

// runEmulated builds testdata/mmaemu's main (with the given compiler flags) against
// tfc_kernels.h and runs it; it must report " 0 failed".
func runEmulated(t *testing.T, main string, flags ...string) {
	files := emutest.Read(t, filepath.Join("testdata", "mmaemu"), "tfc_hip.h", "check.h", "attn_check.h", "gemm_check.h", main)
	emutest.AddTemplates(t, files, Sources)
	bin := emutest.Build(t, files, main, append([]string{"-O2"}, flags...)...)
	out, err := exec.Command(bin).CombinedOutput()
	if err != nil || !strings.Contains(string(out), " 0 failed") {
		t.Fatalf("%v\n%s", err, out)
	}
	t.Logf("%s", strings.TrimSpace(string(out)))
}

// TestGeneratedCompileAsCUDA compiles every family's generated source (gen/*.hip) with TFC_CUDA
// set against the emulating header, as nvcc's front end would see it: each function's every
// branch instantiates its templates (a layout's static_asserts included), in each precision and
// with the tensor-core cached attention on both its grids (TFC_PAGED_MMA 1 and 2) and the fill
// layout on wgmma (TFC_FILL_WGMMA). The
// compiler's sample (gen/sample.hip, F16 weights the emulation lacks) is left out.
func TestGeneratedCompileAsCUDA(t *testing.T) {
	t.Parallel()
	names, err := fs.Glob(Sources, "*.hip")
	if err != nil || len(names) == 0 {
		t.Fatalf("no generated sources: %v", err)
	}
	for _, name := range names {
		if name == "sample.hip" {
			continue
		}
		for _, flags := range [][]string{{"-DTFC_BF16=0"}, {"-DTFC_BF16=1"}, {"-DTFC_BF16=1", "-DTFC_PAGED_MMA=1"}, {"-DTFC_BF16=1", "-DTFC_PAGED_MMA=2"}, {"-DTFC_BF16=1", "-DTFC_FILL_WGMMA=1"}} {
			t.Run(name+" "+strings.Join(flags, " "), func(t *testing.T) {
				t.Parallel()
				files := emutest.Read(t, filepath.Join("testdata", "mmaemu"), "tfc_hip.h")
				emutest.AddTemplates(t, files, Sources)
				src, err := fs.ReadFile(Sources, name)
				if err != nil {
					t.Fatal(err)
				}
				files["family.hip"] = src
				files["family.cpp"] = []byte("#include \"tfc_hip.h\"\n#define TFC_CLUSTER_Y(n)\n#include \"tfc_kernels.h\"\n#include \"family.hip\"\n")
				emutest.Build(t, files, "family.cpp", append([]string{"-fsyntax-only"}, flags...)...)
			})
		}
	}
}
