package hip

import "math"

// SampleKernels is a kernel list at Qwen2-VL-2B's shapes that uses every op and every fusion
// Render supports; kernels/gen/sample.hip is its rendering, which the limits audit compiles.
func SampleKernels() []Kernel {
	const (
		vd, vh, vhd = 1280, 16, 80 // vision width, heads, head dim
		d, h, kv    = 1536, 12, 2  // decoder width, heads, kv heads
		hd, f, v    = 128, 8960, 151936
	)
	bf16 := map[string]string{"W": "BF16"}
	linear := func(n, k int, act string, flags ...string) Op {
		return Op{Kind: "linear", Ints: map[string]int{"N": n, "K": k}, Act: act, Flags: set(flags...), DTypes: bf16}
	}
	elem := func(kind string, n int, act string, flags ...string) Op {
		return Op{Kind: kind, Ints: map[string]int{"N": n}, Act: act, Flags: set(flags...)}
	}
	visionRope := func(col int) Op {
		return Op{Kind: "rope", Ints: map[string]int{"heads": vh, "head_dim": vhd, "col": col, "sections": 2, "section0": 20, "section1": 20},
			Floats: map[string]float64{"theta": 10000}, Flags: set("per_axis")}
	}
	mrope := func(heads int) Op {
		return Op{Kind: "rope", Ints: map[string]int{"heads": heads, "head_dim": hd, "sections": 3, "section0": 16, "section1": 24, "section2": 24},
			Floats: map[string]float64{"theta": 1e6}}
	}
	rms := func(flags ...string) Op {
		return Op{Kind: "rmsnorm", Ints: map[string]int{"D": d}, Floats: map[string]float64{"eps": 1e-6}, Flags: set(flags...)}
	}
	layernorm := Op{Kind: "layernorm", Ints: map[string]int{"D": vd}, Floats: map[string]float64{"eps": 1e-6}, Flags: set("has_bias")}
	src := func(s ...string) []string { return s }

	return []Kernel{
		{Name: "vision_patch_embed", Source: src("sample:vision.patch_embed"), Ops: []Op{linear(vd, 3*2*14*14, "")}},
		{Name: "vision_norm", Source: src("sample:vision.norm1"), Ops: []Op{layernorm}},
		{Name: "vision_qkv_rope", Source: src("sample:vision.qkv", "sample:vision.rope_q", "sample:vision.rope_k"),
			Ops: []Op{linear(3*vd, vd, "", "has_bias"), visionRope(0), visionRope(vd)}},
		{Name: "vision_attention", Source: src("sample:vision.attention"), Ops: []Op{{Kind: "attention",
			Ints: map[string]int{"heads": vh, "kv_heads": vh, "head_dim": vhd}, Floats: map[string]float64{"scale": 1 / math.Sqrt(vhd)}}}},
		{Name: "vision_proj_residual", Source: src("sample:vision.proj"), Ops: []Op{linear(vd, vd, "", "has_bias", "has_res")}},
		{Name: "vision_fc1_quick_gelu", Source: src("sample:vision.fc1"), Ops: []Op{linear(4*vd, vd, "quick_gelu", "has_bias")}},
		{Name: "merger_fc1_gelu", Source: src("sample:merger.fc1", "sample:merger.gelu"),
			Ops: []Op{linear(4*vd, 4*vd, "", "has_bias", "internal"), elem("activate", 4*vd, "gelu")}},
		{Name: "merger_norm_gelu", Source: src("sample:merger.ln_q", "sample:merger.gelu_tanh"),
			Ops: []Op{layernorm, elem("activate", vd, "gelu_tanh")}},
		{Name: "embed_tokens", Source: src("sample:embed"), Ops: []Op{{Kind: "embed", Ints: map[string]int{"D": d, "V": v}, DTypes: map[string]string{"Table": "BF16"}}}},
		{Name: "scatter_image_rows", Source: src("sample:scatter"), Ops: []Op{{Kind: "scatter", Ints: map[string]int{"D": d}, DTypes: map[string]string{"Src": "F16"}}}},
		{Name: "gather_last_rows", Source: src("sample:gather"), Ops: []Op{{Kind: "gather", Ints: map[string]int{"D": d}}}},
		{Name: "add_rmsnorm", Source: src("sample:layer.residual", "sample:layer.input_norm"), Ops: []Op{elem("add", d, ""), rms()}},
		{Name: "residual_rmsnorm", Source: src("sample:layer.post_norm"), Ops: []Op{rms("has_res")}},
		{Name: "q_proj_mrope", Source: src("sample:layer.q_proj", "sample:layer.mrope_q"), Ops: []Op{linear(h*hd, d, "", "has_bias"), mrope(h)}},
		{Name: "k_proj_mrope", Source: src("sample:layer.k_proj", "sample:layer.mrope_k"), Ops: []Op{linear(kv*hd, d, "", "has_bias"), mrope(kv)}},
		{Name: "v_proj", Source: src("sample:layer.v_proj"), Ops: []Op{linear(kv*hd, d, "", "has_bias")}},
		{Name: "mrope", Source: src("sample:layer.mrope"), Ops: []Op{mrope(h)}},
		{Name: "decode_attention", Source: src("sample:layer.attention"), Ops: []Op{{Kind: "attention",
			Ints:   map[string]int{"heads": h, "kv_heads": kv, "head_dim": hd, "page_size": 16},
			Floats: map[string]float64{"scale": 1 / math.Sqrt(hd)}, Flags: set("cache"),
			DTypes: map[string]string{"Cache.K": "BF16", "Cache.V": "BF16"}}}},
		{Name: "o_proj_residual", Source: src("sample:layer.o_proj"), Ops: []Op{linear(d, h*hd, "", "has_res")}},
		{Name: "mlp_gate_silu", Source: src("sample:layer.gate_proj"), Ops: []Op{linear(f, d, "silu")}},
		{Name: "mlp_up_mul", Source: src("sample:layer.up_proj", "sample:layer.swiglu"), Ops: []Op{linear(f, d, "", "internal"), elem("mul", f, "")}},
		{Name: "swiglu", Source: src("sample:layer.swiglu"), Ops: []Op{elem("glu", f, "silu")}},
		{Name: "mlp_down_residual", Source: src("sample:layer.down_proj"), Ops: []Op{linear(d, f, "", "has_res")}},
		{Name: "elementwise_chain", Source: src("sample:chain"),
			Ops: []Op{elem("add", d, "", "internal"), elem("mul", d, "", "internal"), elem("activate", d, "gelu_tanh", "internal"), elem("copy", d, "")}},
		{Name: "final_norm", Source: src("sample:norm"), Ops: []Op{rms()}},
		{Name: "lm_head", Source: src("sample:lm_head"), Ops: []Op{linear(v, d, "")}},
		{Name: "greedy_picks", Source: src("sample:argmax"), Ops: []Op{{Kind: "argmax", Ints: map[string]int{"V": v}}}},
	}
}

func set(flags ...string) map[string]bool {
	if len(flags) == 0 {
		return nil
	}
	m := map[string]bool{}
	for _, f := range flags {
		m[f] = true
	}
	return m
}
