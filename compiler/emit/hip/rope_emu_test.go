package hip_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"tfc/compiler/emit/hip"
	"tfc/kernels"
	"tfc/kernels/emutest"
)

// ropeKernels are the kernels kernels/testdata/mmaemu/rope.cpp runs (its comment has their
// shapes): linears with a fused rope of head_dim 12, whose 48-column tiles (four heads) hold
// heads that the rope must not rotate, past N or past the rope's columns.
func ropeKernels() []hip.Kernel {
	linear := func(n, k int) hip.Op {
		return hip.Op{Kind: "linear", Ints: map[string]int{"N": n, "K": k}, Flags: map[string]bool{"has_bias": true},
			DTypes: map[string]string{"W": "BF16"}}
	}
	mrope := hip.Op{Kind: "rope", Ints: map[string]int{"heads": 2, "head_dim": 12, "col": 0, "sections": 3, "section0": 2, "section1": 2, "section2": 2},
		Floats: map[string]float64{"theta": 1e6}}
	visionRope := func(col int) hip.Op {
		return hip.Op{Kind: "rope", Ints: map[string]int{"heads": 3, "head_dim": 12, "col": col, "sections": 2, "section0": 3, "section1": 3},
			Floats: map[string]float64{"theta": 10000}, Flags: map[string]bool{"per_axis": true}}
	}
	return []hip.Kernel{
		{Name: "k_proj_mrope", Ops: []hip.Op{linear(24, 48), mrope}, Role: "decoder"},
		{Name: "vision_qkv_rope", Ops: []hip.Op{linear(3*36, 36), visionRope(0), visionRope(36)}, Role: "vision"},
	}
}

// The rope pass's per-head guard and its tile test, and what they were before a rope pass
// checked its heads (it rotated every head of each tile starting inside its columns).
var (
	headGuard = regexp.MustCompile(`if \(m >= M \|\| n0 \+ c - j < \d+ \|\| n0 \+ c - j >= \d+\) continue;`)
	tileTest  = regexp.MustCompile(`if \(n0 < (\d+) && n0 \+ BN > (\d+)\) \{`)
)

// TestRopeEpilogueEmulated renders linear kernels with fused ropes of head_dim 12 and runs them on
// the CPU through the emulating header of kernels/testdata/mmaemu (rope.cpp checks every output
// column and that nothing past N or the rows is written). The planted control renders the rope
// pass as it was before each head checked that its rope rotates it, and must fail every case:
// then k_proj's tile rotated two heads past N = 24 into the next row, and the qkv tiles rotated
// k's first head by q's positions and v's first two heads by k's.
func TestRopeEpilogueEmulated(t *testing.T) {
	t.Parallel()
	ks := ropeKernels()
	src, err := hip.Render("rope", ks)
	if err != nil {
		t.Fatal(err)
	}
	var defs []string
	for _, k := range ks {
		ls, err := hip.Launches(k)
		if err != nil {
			t.Fatal(err)
		}
		l := ls[0]
		if len(ls) != 1 || l.Threads != 256 || l.PlusSpans {
			t.Fatalf("%s: launches %+v; rope.cpp runs one launch of 256 threads", k.Name, ls)
		}
		p := map[string]string{"k_proj_mrope": "KPROJ", "vision_qkv_rope": "QKV"}[k.Name]
		defs = append(defs, fmt.Sprintf("-D%s_BM=%d", p, l.RowsPerBlock), fmt.Sprintf("-D%s_GY=%d", p, l.GridY), fmt.Sprintf("-D%s_SGY=%d", p, l.SmallRowsGridY),
			fmt.Sprintf("-D%s_MID=%d", p, l.MidRows), fmt.Sprintf("-D%s_MBM=%d", p, l.MidRowsPerBlock))
	}
	old := headGuard.ReplaceAll(src, []byte("if (m >= M) continue;"))
	old = tileTest.ReplaceAll(old, []byte("if (n0 >= $2 && n0 < $1) {"))
	// k_proj's rope pass in its function and in its mid-size one (k_proj_mrope_mid), the tower
	// kernel's two in its one function
	if n, m := len(headGuard.FindAll(src, -1)), len(tileTest.FindAll(src, -1)); n != 4 || m != 4 {
		t.Fatalf("the rope passes have %d head guards and %d tile tests, not 4 and 4; update the control\n%s", n, m, src)
	}
	t.Run("fixed", func(t *testing.T) {
		t.Parallel()
		out, err := runRopeEmulated(t, src, defs)
		if err != nil || !strings.Contains(out, " 0 failed") {
			t.Fatalf("%v\n%s", err, out)
		}
		t.Logf("%s", out)
	})
	t.Run("control", func(t *testing.T) {
		t.Parallel()
		out, err := runRopeEmulated(t, old, defs)
		if err == nil || !regexp.MustCompile(`(?m)^0 passed, [1-9]\d* failed$`).MatchString(out) {
			t.Fatalf("the planted control (the rope pass before its head guard) must fail every case: %v\n%s", err, out)
		}
		t.Logf("the control fails as it must:\n%s", out)
	})
}

// runRopeEmulated builds rope.cpp against src (as rope_kernels.hip), the emulating tfc_hip.h and
// tfc_kernels.h, and returns what it prints.
func runRopeEmulated(t *testing.T, src []byte, defs []string) (string, error) {
	if runtime.GOOS != "linux" {
		t.Skip("rope.cpp places LDS in an ELF section (emu_lds)")
	}
	files := emutest.Read(t, filepath.Join("..", "..", "..", "kernels", "testdata", "mmaemu"), "tfc_hip.h", "rope.cpp")
	files["rope_kernels.hip"] = src
	emutest.AddTemplates(t, files, kernels.Sources)
	bin := emutest.Build(t, files, "rope.cpp", append([]string{"-O1"}, defs...)...)
	out, err := exec.Command(bin).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
