package hip

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/runtime/device"
	"tfc/runtime/device/catalog"
)

var update = flag.Bool("update", false, "rewrite testdata/sample.hip and kernels/gen/sample.hip from the renderer")

// sampleHIP is where the audit finds the rendered sample.
var sampleHIP = filepath.Join("..", "..", "..", "kernels", "gen", "sample.hip")

func TestSampleGolden(t *testing.T) {
	got, err := Render("sample", SampleKernels())
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "sample.hip")
	if *update {
		for _, p := range []string{golden, sampleHIP} {
			if err := os.WriteFile(p, got, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, p := range []string{golden, sampleHIP} {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("%v; run go test ./compiler/emit/hip -update", err)
		}
		if d := cmp.Diff(string(want), string(got)); d != "" {
			t.Errorf("%s is stale (-want +got); run go test ./compiler/emit/hip -update\n%s", p, d)
		}
	}
}

func TestSampleCoversCatalog(t *testing.T) {
	seen := map[string]bool{}
	fused := map[string]bool{}
	for _, k := range SampleKernels() {
		var chain []string
		for _, o := range k.Ops {
			seen[o.Kind] = true
			chain = append(chain, o.Kind)
		}
		fused[strings.Join(chain, "+")] = true
	}
	for _, o := range catalog.Ops {
		if !seen[o.Name] {
			t.Errorf("SampleKernels has no %s", o.Name)
		}
	}
	for _, f := range []string{"linear+rope", "linear+rope+rope", "linear+activate", "linear+mul", "add+rmsnorm", "layernorm+activate", "add+mul+activate+copy"} {
		if !fused[f] {
			t.Errorf("SampleKernels has no %s kernel", f)
		}
	}
}

// handMade is a small kernel list with known parameters.
var handMade = []Kernel{
	{Name: "qkv", Source: []string{"graphs/t.graph:3", "graphs/t.graph:4"}, Ops: []Op{
		{Kind: "linear", Ints: map[string]int{"N": 128, "K": 64}, Flags: map[string]bool{"has_bias": true}, DTypes: map[string]string{"W": "BF16"}},
		{Kind: "rope", Ints: map[string]int{"heads": 2, "head_dim": 32, "sections": 1, "section0": 16}, Floats: map[string]float64{"theta": 10000}},
	}},
	{Name: "attn", Source: []string{"graphs/t.graph:9"}, Ops: []Op{
		{Kind: "attention", Ints: map[string]int{"heads": 4, "kv_heads": 2, "head_dim": 32, "page_size": 16},
			Floats: map[string]float64{"scale": 0.125}, Flags: map[string]bool{"cache": true}},
	}},
	{Name: "norm", Source: []string{"graphs/t.graph:12"}, Ops: []Op{
		{Kind: "rmsnorm", Ints: map[string]int{"D": 64}, Floats: map[string]float64{"eps": 1e-5}, Flags: map[string]bool{"has_res": true}},
	}},
}

func TestParams(t *testing.T) {
	names := func(k Kernel) []string {
		ps, err := Params(k)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, p := range ps {
			s = append(s, p.CType+" "+p.Name)
		}
		return s
	}
	want := [][]string{
		{"const float* op0_X", "int op0_X_ld", "const tfc_bf16* op0_W", "int op0_W_ld", "const float* op0_B", "int op0_B_ld",
			"float* op0_Y", "int op0_Y_ld", "float* op1_X", "int op1_X_ld", "const int* op1_Pos", "int op1_Pos_ld", "int M"},
		{"const float* op0_Q", "int op0_Q_ld", "const float* op0_K", "int op0_K_ld", "const float* op0_V", "int op0_V_ld",
			"float* op0_Y", "int op0_Y_ld", "float* op0_Cache_K", "int op0_Cache_K_ld", "float* op0_Cache_V", "int op0_Cache_V_ld",
			"const int* op0_Rows_RowSeq", "int op0_Rows_RowSeq_ld", "const int* op0_Rows_RowPos", "int op0_Rows_RowPos_ld",
			"const int* op0_Rows_PageTable", "int op0_Rows_PageTable_ld", "int M"},
		{"const float* op0_X", "int op0_X_ld", "const float* op0_Res", "int op0_Res_ld", "float* op0_Sum", "int op0_Sum_ld",
			"const float* op0_W", "int op0_W_ld", "float* op0_Y", "int op0_Y_ld", "int M"},
	}
	for i, k := range handMade {
		if d := cmp.Diff(want[i], names(k)); d != "" {
			t.Errorf("%s params (-want +got):\n%s", k.Name, d)
		}
	}
	spans := Kernel{Name: "a", Ops: []Op{{Kind: "attention", Ints: map[string]int{"heads": 2, "kv_heads": 2, "head_dim": 16}, Floats: map[string]float64{"scale": 1}}}}
	ps, err := Params(spans)
	if err != nil {
		t.Fatal(err)
	}
	last := ps[len(ps)-1]
	if last.Name != "S" || last.Kind != device.ParamSpans || ps[len(ps)-3].Field != "Spans" {
		t.Errorf("attention over spans ends %+v, want Spans then M then S", ps[len(ps)-3:])
	}
}

func TestLaunches(t *testing.T) {
	want := [][]device.Launch{
		{{Symbol: "qkv", Threads: 256, RowsPerBlock: 32, GridY: 4, SmallRows: 8, SmallRowsGridY: 8, SmallSymbol: "qkv_rows", MidRows: 64, MidRowsPerBlock: 16, MidSymbol: "qkv_mid", BandRows: 64, BandRowsPerBlock: 32, BandSymbol: "qkv_band",
			FlopsPerRow: 2 * 128 * 64, WeightBytes: 128*64*2 + 128*4, RowBytes: (64 + 128) * 4}}, // 16-column tiles of rotary pairs at M ≤ 8, 16-row tiles at M ≤ 64, or bands of 32 rows of the M ≤ 8 layout
		{{Symbol: "attn_kvstore", Threads: 256, RowsPerBlock: 1, GridY: 1}, {Symbol: "attn", Threads: 256, RowsPerBlock: 1, GridY: 4, SmallRows: 8, SmallRowsGridY: 32, SmallSymbol: "attn_rows", SmallClusterY: 8, PagedMMAGridY: 2}}, // a block a query head; a cluster of 8 at M ≤ 8; on tensor cores a block a KV head's 2 query heads
		{{Symbol: "norm", Threads: 256, RowsPerBlock: 1, GridY: 1}},
	}
	for i, k := range handMade {
		got, err := Launches(k)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want[i], got); d != "" {
			t.Errorf("%s launches (-want +got):\n%s", k.Name, d)
		}
	}
}

func TestRenderHandMade(t *testing.T) {
	got, err := Render("t", handMade)
	if err != nil {
		t.Fatal(err)
	}
	text := string(got)
	for _, want := range []string{
		"// Code generated by tfc from graphs/t.graph; DO NOT EDIT.",
		"#include \"tfc_hip.h\"",
		"// qkv: linear(bias) → rope\n// from graphs/t.graph:3, graphs/t.graph:4\n",
		"extern \"C\" __global__ __launch_bounds__(256) void qkv(",
		"extern \"C\" __global__ __launch_bounds__(256) void attn_kvstore(",
		"tfc_kv_store<64, 16, 256>(",
		"tfc_attention_paged<32, 2, 32, 256, 16, 8, small, MUT>(",
		"// launch qkv: grid (ceil(M/32), 4), or (1, 8) as qkv_rows when M ≤ 8, or (ceil(M/16), 4) as qkv_mid when M ≤ 64, or (ceil(M/32), 8) as qkv_band when M ≤ 64 with the band layout, 256 threads",
		"constexpr bool small = true, mid = false, band = true;  // launched at 8 < M ≤ 64 with the band layout (CUDA)",
		"tfc_gemm_mma_rows<BM, TFC_SMALL_BN, N, K, MUT, TFC_MMA_TERMS, band ? 32 : TFC_SMALL_ROWS>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, tfc_rope_pairs<BN / 2>{n0});",
		"tfc_gemm_rows<BM, TFC_SMALL_BN, BK, N, K, MUT, tfc_gemm_smem<BM, BN, BK>::floats>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, tfc_rope_pairs<BN / 2>{n0});",
		"const int r = e / (bn / 2), c = e % (bn / 2), j = j0 + c, m = m0 + r;",
		"__device__ const float qkv_op1_inv[16] = {1.0f, 0.56234133f, 0.31622776f, ",
		"const float f = qkv_op1_inv[j];",
		"if (!((n >= 0 && n < 64))) tfc_st(op0_Y",
		"rsqrtf(tfc_block_sum<256, MUT>(part, red) / D + 1e-05f)",
		"tfc_st(op0_Sum + (size_t)m * op0_Sum_ld + c, v);",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("rendered text lacks %q", want)
		}
	}
	if strings.Index(text, "void attn_kvstore(") > strings.Index(text, "void attn(") {
		t.Error("attn_kvstore must come before attn, which it precedes at launch")
	}
}

func TestMutations(t *testing.T) {
	clean, err := Render("sample", SampleKernels())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		kernel string
		m      Mutation
	}{
		{"lm_head", OffByOneBound}, {"lm_head", WrongStride}, {"lm_head", MissingBarrier},
		{"final_norm", DroppedScale}, {"vision_attention", DroppedScale}, {"decode_attention", MissingBarrier},
		{"swiglu", OffByOneBound}, {"embed_tokens", WrongStride}, {"mrope", OffByOneBound},
	} {
		got, err := Render("sample", SampleKernels(), Mutate(c.kernel, c.m))
		if err != nil {
			t.Errorf("%s %s: %v", c.kernel, c.m, err)
			continue
		}
		d := lineDiff(string(clean), string(got))
		want := []string{"-  constexpr int MUT = TFC_MUT_NONE;", "+  constexpr int MUT = " + mutationMacros[c.m] + ";  // planted control: " + c.m.String()}
		for len(d) >= 4 && d[len(d)-2] == want[0] && d[len(d)-1] == want[1] { // small-row and mid-size functions carry MUT too
			d = d[:len(d)-2]
		}
		if len(d) != 2 || d[0] != want[0] || d[1] != want[1] {
			t.Errorf("%s %s changed %q, want only the MUT line of that kernel", c.kernel, c.m, d)
			continue
		}
		// The changed line belongs to the named kernel.
		at := strings.Index(string(got), want[1][1:])
		if start := strings.LastIndex(string(got)[:at], "void "); !strings.HasPrefix(string(got)[start:], "void "+c.kernel+"(") {
			t.Errorf("%s %s: the mutation landed in another kernel", c.kernel, c.m)
		}
	}
	for _, c := range []struct {
		kernel string
		m      Mutation
		err    string
	}{
		{"lm_head", DroppedScale, "mutation dropped-scale does not apply to kernel lm_head"},
		{"swiglu", MissingBarrier, "mutation missing-barrier does not apply to kernel swiglu"},
		{"nope", OffByOneBound, `names kernel "nope", which is not in family sample`},
	} {
		_, err := Render("sample", SampleKernels(), Mutate(c.kernel, c.m))
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s %s: error %v, want it to say %q", c.kernel, c.m, err, c.err)
		}
	}
	for _, m := range []Mutation{OffByOneBound, DroppedScale, WrongStride, MissingBarrier} {
		if p, err := ParseMutation(m.String()); err != nil || p != m {
			t.Errorf("ParseMutation(%q) = %v, %v", m, p, err)
		}
	}
}

// lineDiff lists the lines only in a ("-") and only in b ("+"), for texts with equal line counts.
func lineDiff(a, b string) []string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	if len(al) != len(bl) {
		return []string{"line counts differ"}
	}
	var d []string
	for i := range al {
		if al[i] != bl[i] {
			d = append(d, "-"+al[i], "+"+bl[i])
		}
	}
	return d
}

func TestRenderErrors(t *testing.T) {
	lin := Op{Kind: "linear", Ints: map[string]int{"N": 64, "K": 64}}
	for _, c := range []struct {
		k   Kernel
		err string
	}{
		{Kernel{Name: "a b", Ops: []Op{lin}}, "must be a C identifier"},
		{Kernel{Name: "k"}, "kernel k has no ops"},
		{Kernel{Name: "k", Ops: []Op{{Kind: "conv"}}}, `unknown op "conv"`},
		{Kernel{Name: "k", Ops: []Op{{Kind: "linear", Ints: map[string]int{"N": 4}}}}, `needs Ints["K"] > 0`},
		{Kernel{Name: "k", Ops: []Op{{Kind: "copy", Ints: map[string]int{"N": 0}}}}, `needs Ints["N"] > 0`},
		{Kernel{Name: "k", Ops: []Op{lin, {Kind: "rmsnorm", Ints: map[string]int{"D": 64}, Floats: map[string]float64{"eps": 1e-6}}}}, "op 0 (linear) cannot be fused here"},
		{Kernel{Name: "k", Ops: []Op{lin, {Kind: "gather", Ints: map[string]int{"D": 64}}}}, "op 1 (gather) cannot follow a linear"},
		{Kernel{Name: "k", Ops: []Op{lin, {Kind: "add", Ints: map[string]int{"N": 32}}}}, "has N=32 but the chain has 64 columns"},
		{Kernel{Name: "k", Ops: []Op{{Kind: "add", Ints: map[string]int{"N": 8}, DTypes: map[string]string{"A": "F64"}}}}, `add.A has dtype "F64"`},
		{Kernel{Name: "k", Ops: []Op{{Kind: "activate", Ints: map[string]int{"N": 8}, Act: "relu"}}}, `unknown activation "relu"`},
		{Kernel{Name: "k", Ops: []Op{{Kind: "rope", Ints: map[string]int{"heads": 1, "head_dim": 8, "sections": 1, "section0": 3}, Floats: map[string]float64{"theta": 1e4}}}}, "sections sum to 3 pairs but head_dim 8 has 4"},
		{Kernel{Name: "k", Ops: []Op{{Kind: "attention", Ints: map[string]int{"heads": 3, "kv_heads": 2, "head_dim": 8}, Floats: map[string]float64{"scale": 1}}}}, "not a multiple of kv_heads"},
	} {
		_, err := Render("t", []Kernel{c.k})
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("kernel %+v: error %v, want it to say %q", c.k, err, c.err)
		}
	}
	if _, err := Render("t", []Kernel{{Name: "k", Ops: []Op{lin}}, {Name: "k", Ops: []Op{lin}}}); err == nil || !strings.Contains(err.Error(), "defined twice") {
		t.Errorf("duplicate kernel names: error %v", err)
	}
}

// TestVisionMMA: a vision kernel's linear takes tfc_gemm_mma under CUDA at every M (the 16-column
// tile of a launch of at most 8 rows too), tfc_gemm_amd under TFC_AMD_MATRIX (CDNA, RDNA3), and keeps
// tfc_gemm_tile and tfc_gemm_rows for other AMD targets; a
// decoder's linear, F16 weights, and tiles whose LDS would not fit keep the scalar paths alone.
func TestVisionMMA(t *testing.T) {
	bf16 := map[string]string{"W": "BF16"}
	lin := func(n, k int, dt map[string]string) Op {
		return Op{Kind: "linear", Ints: map[string]int{"N": n, "K": k}, Flags: map[string]bool{"has_bias": true}, DTypes: dt}
	}
	rope := func(heads, hd int) Op {
		return Op{Kind: "rope", Ints: map[string]int{"heads": heads, "head_dim": hd, "sections": 1, "section0": hd / 2, "col": 0}, Floats: map[string]float64{"theta": 1e4}}
	}
	for _, c := range []struct {
		k    Kernel
		mma  bool
		want []string
	}{
		{Kernel{Name: "v", Role: "vision", Ops: []Op{lin(1280, 5120, bf16)}}, true, []string{ // a plain linear: a fill function too
			"  constexpr int FBM = 128, FBN = 64;  // the fill tile\n  constexpr int BM = fill ? FBM : 64, BN = 64, N = 1280, K = 5120;\n" +
				"  constexpr int TBM = fill ? 16 : BM, TBN = fill ? 16 : BN;  // the other layouts' tile\n" +
				"#if TFC_CUDA || TFC_AMD_MATRIX  // tensor (matrix) cores: the same path at every M\n" +
				"  __shared__ __align__(16) float tile_lds[fill ? 4 : tfc_mma_floats<TBM, TBN>];\n  float* const smem = fill ? tfc_fill_lds() : tile_lds;\n" +
				"  static_assert(tfc_fill_smem<FBM, FBN>::bytes <= 163840, \"the launch passes 163840 bytes of dynamic LDS (the schedule's fill_lds)\");\n" +
				"#else\n  constexpr int BK = 16;\n  __shared__ float smem[tfc_gemm_smem<BM, BN, BK>::floats];\n#endif\n",
			"#if TFC_CUDA\n  if (small)\n    tfc_gemm_mma_rows<TBM, TFC_SMALL_BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n" +
				"  else if (fill)\n    tfc_gemm_mma_fill<FBM, FBN, N, K, MUT, TFC_MMA_TERMS, 4>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n" +
				"  else\n    tfc_gemm_mma<TBM, TBN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n#elif TFC_AMD_MATRIX\n" +
				"  if (small)\n    tfc_gemm_amd<16, TFC_SMALL_BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n" +
				"  else\n    tfc_gemm_amd<TBM, TBN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n#else\n  if (small)\n    tfc_gemm_rows<",
			"tfc_gemm_tile<TBM, TBN, BK, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n#endif\n",
			"constexpr bool small = false, fill = TFC_FILL;  // launched at M > 256 with the fill layout (CUDA)",
		}},
		{Kernel{Name: "v", Role: "vision", Ops: []Op{lin(3840, 1280, bf16), rope(16, 80)}}, true, []string{
			"constexpr int BM = 64, BN = 80, N = 3840, K = 1280;",
			"#if TFC_CUDA\n  if (pairs)\n    tfc_gemm_mma_rows<BM, TFC_SMALL_BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, tfc_rope_pairs<BN / 2>{n0});\n" +
				"  else\n    tfc_gemm_mma<BM, BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n#elif TFC_AMD_MATRIX\n" +
				"  if (pairs)\n    tfc_gemm_amd<16, TFC_SMALL_BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, tfc_rope_pairs<BN / 2>{n0});\n",
		}},
		{Kernel{Name: "v", Role: "vision", Ops: []Op{lin(3840, 1280, bf16), rope(16, 40)}}, true, []string{ // head_dim 40: whole-head tiles at every M
			"#if TFC_CUDA\n  if (M <= TFC_SMALL_ROWS)\n    tfc_gemm_mma_rows<BM, BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n  else\n    tfc_gemm_mma<BM, BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n#elif TFC_AMD_MATRIX\n" +
				"  tfc_gemm_amd<BM, BN, N, K, MUT>(smem, op0_X, op0_X_ld, op0_W, op0_W_ld, M, m0, n0);\n#else\n  tfc_gemm_tile<",
		}},
		{Kernel{Name: "v", Role: "vision", Ops: []Op{lin(4608, 1536, bf16), rope(12, 128)}}, true, []string{"constexpr int BM = 32, BN = 128, N = 4608, K = 1536;"}},
		{Kernel{Name: "v", Role: "vision", Ops: []Op{lin(864, 64, bf16), rope(4, 72)}}, false, nil}, // 64×144 tiles: two stages need 53760 bytes
		{Kernel{Name: "d", Role: "decoder", Ops: []Op{lin(1280, 5120, bf16)}}, true, nil},
		{Kernel{Name: "v", Role: "vision", Ops: []Op{lin(1280, 5120, map[string]string{"W": "F16"})}}, false, nil},
		{Kernel{Name: "v", Ops: []Op{lin(1280, 5120, bf16)}}, true, nil},
	} {
		got, err := Render("t", []Kernel{c.k})
		if err != nil {
			t.Fatal(err)
		}
		text := string(got)
		if has := strings.Contains(text, "tfc_gemm_mma"); has != c.mma {
			t.Errorf("%s %s: tfc_gemm_mma rendered %v, want %v", c.k.Role, kinds(c.k), has, c.mma)
		}
		if !strings.Contains(text, "tfc_gemm_tile<BM, BN, BK, N, K, MUT>") && !strings.Contains(text, "tfc_gemm_tile<TBM, TBN, BK, N, K, MUT>") {
			t.Errorf("%s %s: tfc_gemm_tile is gone; AMD keeps it", c.k.Role, kinds(c.k))
		}
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("%s %s: rendered text lacks %q:\n%s", c.k.Role, kinds(c.k), w, text)
			}
		}
		// the grid is the scalar path's: the runtime's Geometry does not know the role
		l, err := Launches(c.k)
		if err != nil {
			t.Fatal(err)
		}
		if c.k.Ops[len(c.k.Ops)-1].Kind != "rope" && l[0].SmallRowsGridY != ceilDiv(c.k.Ops[0].int("N"), smallBN) {
			t.Errorf("%s: small-row grid %d", c.k.Name, l[0].SmallRowsGridY)
		}
	}
}

// TestRenderRopeAlternating renders a qkv linear with fused alternating ropes (Pixtral's: pair j'
// of axis a at frequency θ^(-2(2j'+a)/head_dim)); the per-axis rendering of the same kernel is
// the control, which must not carry that frequency.
func TestRenderRopeAlternating(t *testing.T) {
	rope := func(col int, flag string) Op {
		return Op{Kind: "rope", Ints: map[string]int{"heads": 2, "head_dim": 20, "col": col, "sections": 2, "section0": 5, "section1": 5},
			Floats: map[string]float64{"theta": 10000}, Flags: map[string]bool{flag: true}}
	}
	kernel := func(flag string) []Kernel {
		lin := Op{Kind: "linear", Ints: map[string]int{"N": 120, "K": 40}, DTypes: map[string]string{"W": "BF16"}, Flags: map[string]bool{}}
		return []Kernel{{Name: "qkv", Ops: []Op{lin, rope(0, flag), rope(40, flag)}, Role: "vision"}}
	}
	// pairs 0-4 turn at θ^(-4j'/20), pairs 5-9 at θ^(-(4j'+2)/20): pair 5 at θ^-0.1
	const want = "__device__ const float qkv_op1_inv[10] = {1.0f, 0.15848932f, 0.025118863f, 0.0039810706f, 0.0006309573f, 0.39810717f, 0.063095726f, "
	got, err := Render("t", kernel("alternating"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), want) {
		t.Errorf("alternating rope renders without %q:\n%s", want, got)
	}
	control, err := Render("t", kernel("per_axis"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(control), want) {
		t.Error("control: the per-axis rope renders the alternating frequency")
	}
}

// TestPagedHeads: the tensor-core cached attention's block takes the largest divisor of a KV
// head's query heads that is at most a block's 8 warps (tfc_paged_heads in kernels/tfc_attention.h).
func TestPagedHeads(t *testing.T) {
	for qg, want := range map[int]int{1: 1, 2: 2, 3: 3, 6: 6, 7: 7, 8: 8, 9: 3, 11: 1, 12: 6, 14: 7, 16: 8} {
		if got := pagedHeads(qg); got != want {
			t.Errorf("pagedHeads(%d) = %d, want %d", qg, got, want)
		}
	}
}
