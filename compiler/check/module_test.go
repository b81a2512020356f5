package check

import (
	"os"
	"strings"
	"testing"

	"tfc/compiler/ir"
)

func checkFile(t *testing.T, path, rel string) *ir.Module {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, diags := SourceWith(rel, string(src), Beside(repoRoot, rel))
	if len(diags) > 0 {
		t.Fatalf("%s", diags.Format(string(src)))
	}
	if err := ir.Verify(m); err != nil {
		t.Fatalf("%s: the module breaks IR invariants:\n%v", rel, err)
	}
	return m
}

// TestQwen2VLModule checks what lowering reads from the family's module.
func TestQwen2VLModule(t *testing.T) {
	m := checkFile(t, "../../graphs/qwen2_vl.graph", "graphs/qwen2_vl.graph")
	if m.Family != "qwen2_vl" || m.ModelTypes[0] != "qwen2_vl" || m.Architectures[0] != "Qwen2VLForConditionalGeneration" {
		t.Errorf("binding: %s %v %v", m.Family, m.ModelTypes, m.Architectures)
	}
	if m.OCR == nil || m.OCR.Prompt != "Read all the text in this image." || m.OCR.DPI != 200 {
		t.Errorf("OCR %+v, want the reading prompt at 200 DPI", m.OCR)
	}
	if len(m.Weights) != 34 {
		t.Errorf("%d weight templates, want 34", len(m.Weights))
	}
	head := m.Weights[len(m.Weights)-1]
	if head.Name != "lm_head.weight" || head.Cond == nil || head.Cond.String() != "!tied" {
		t.Errorf("last weight %s cond %v", head.Name, head.Cond)
	}
	qkv := m.Weights[5]
	if qkv.TensorName("visual", 3) != "visual.blocks.3.attn.qkv.weight" || qkv.Count.String() != "VL" || qkv.Shape.String() != "[3*VD, VD]" {
		t.Errorf("qkv template: %s count %s shape %s", qkv.TensorName("visual", 3), qkv.Count, qkv.Shape)
	}
	if c := m.ConfigByName("HD"); c == nil || c.Derived == nil || c.Derived.Dim.String() != "D/H" {
		t.Errorf("HD: %+v", c)
	}
	if c := m.ConfigByName("sect"); c == nil || c.Type != ir.IntList || c.Len != 3 || len(c.Paths) != 4 {
		t.Errorf("sect: %+v", c)
	}
	if c := m.ConfigByName("tied"); c == nil || c.Default == nil || c.Default.Bool {
		t.Errorf("tied default: %+v", c)
	}
	vision, decode := m.Graph("vision"), m.Graph("decode")
	if vision == nil || decode == nil {
		t.Fatal("graphs vision and decode")
	}
	if got := vision.Results[0].Shape.String(); got != "[N/(M*M), D]" {
		t.Errorf("vision result %s", got)
	}
	if len(vision.Requires) != 1 {
		t.Errorf("vision requires: %d", len(vision.Requires))
	}
	var loop *ir.Node
	for _, n := range decode.Nodes {
		if n.Op == ir.OpLoop {
			loop = n
		}
	}
	if loop == nil || loop.Loop.Index != "i" || loop.Loop.Count.String() != "L" || len(loop.Loop.Carried) != 1 || loop.Loop.Carried[0].Name != "x" {
		t.Fatalf("decode loop: %+v", loop)
	}
	ops := map[ir.Op]int{}
	ir.Walk(decode.Nodes, func(n *ir.Node, depth int) {
		ops[n.Op]++
		if n.Pos.Line == 0 || n.Pos.File != "graphs/qwen2_vl.graph" {
			t.Errorf("%s has no position", n.Op)
		}
		if n.Op == ir.OpAttention {
			if depth != 1 || n.Attr("head_dim").Int.String() != "HD" || n.Attr("scale").FloatRsqrt.String() != "HD" {
				t.Errorf("attention attrs: %s", n.Attr("head_dim"))
			}
			if a := n.Arg("cache"); a == nil || a.Index == nil || a.Index.String() != "i" {
				t.Errorf("attention cache operand")
			}
		}
		if n.Op == ir.OpLinear && n.Arg("weight").Weight != nil && strings.Contains(n.Arg("weight").Weight.Name, "q_proj") {
			if n.Arg("bias") == nil || n.Arg("weight").Weight.Layer.String() != "i" {
				t.Errorf("q_proj linear: bias %v layer %s", n.Arg("bias"), n.Arg("weight").Weight.Layer)
			}
		}
	})
	want := map[ir.Op]int{ir.OpEmbed: 1, ir.OpScatter: 1, ir.OpLoop: 1, ir.OpRMSNorm: 3, ir.OpLinear: 8, ir.OpRope: 2,
		ir.OpAttention: 1, ir.OpAdd: 2, ir.OpSwiGLU: 1, ir.OpGather: 1, ir.OpSelect: 1}
	for op, n := range want {
		if ops[op] != n {
			t.Errorf("decode has %d %s nodes, want %d", ops[op], op, n)
		}
	}
}

// TestDiagnosticFormat checks the excerpt and caret, tabs kept so the caret lines up.
func TestDiagnosticFormat(t *testing.T) {
	ds := Diagnostics{{Pos: ir.Pos{File: "f.graph", Line: 2, Col: 6}, Msg: "bad"}}
	got := ds.Format("a\n\tx = y\n")
	want := "f.graph:2:6: bad\n\t\tx = y\n\t\t    ^\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestSuggestions(t *testing.T) {
	src := "family f {\n  model_type \"f\"\n}\nconfig {\n  D int = hidden_size\n}\nweights {\n  w.weight [D, D]\n}\n" +
		"graph g(x [N, D]) -> [N, D] {\n  return lienar(x, w)\n}\ngraph h(x [N, D]) -> [N, D] {\n  return linear(x, w, bais: w)\n}\n" +
		"graph k(x [N, D]) -> [N, D] {\n  return linear(xx, w)\n}\n"
	_, diags := Source("s.graph", src)
	want := []string{
		"s.graph:11:10: unknown op lienar; did you mean linear?",
		"s.graph:14:23: unknown attribute bais of linear; did you mean bias?",
		"s.graph:17:17: undefined name xx; did you mean x?",
	}
	var got []string
	for _, d := range diags {
		got = append(got, d.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestOCRPromptJoined checks that an ocr_prompt of several strings is their concatenation: dots.ocr's
// layout prompt, written one line of the card's text a string.
func TestOCRPromptJoined(t *testing.T) {
	m := checkFile(t, "../../graphs/dots_ocr.graph", "graphs/dots_ocr.graph")
	if m.OCR == nil || m.OCR.DPI != 200 {
		t.Fatalf("OCR %+v, want 200 DPI", m.OCR)
	}
	const first = "Please output the layout information from the PDF image, including each layout element's bbox, its category, and the corresponding text content within the bbox.\n\n1. Bbox format: [x1, y1, x2, y2]\n\n2. Layout"
	if !strings.HasPrefix(m.OCR.Prompt, first) || !strings.HasSuffix(m.OCR.Prompt, "must be a single JSON object.\n") {
		t.Errorf("prompt %q", m.OCR.Prompt)
	}
}
