package compiler_test

import (
	"strings"
	"testing"

	"tfc/compiler"
)

// TestGLM4VImageRule compiles graphs/qwen2_vl.graph with its image rule renamed glm4v: the vision
// glue lists merge windows together (Order M) and reads no merge_order, as under qwen2_vl, and
// the program names the rule, which the runtime matches against preprocessor_config.json.
func TestGLM4VImageRule(t *testing.T) {
	const qwenRule = "image qwen2_vl(patch: P, temporal: TP, merge: M)"
	src := string(readFile(t, "../"+qwen2VLGraph))
	if !strings.Contains(src, qwenRule) {
		t.Fatalf("%s no longer has the line %q", qwen2VLGraph, qwenRule)
	}
	glm := strings.Replace(src, qwenRule, "image glm4v(patch: P, temporal: TP, merge: M)", 1)
	files, diags, err := compiler.Compile(qwen2VLGraph, []byte(glm), compiler.Options{Root: ".."})
	if err != nil || len(diags) > 0 {
		t.Fatalf("%v\n%s", err, diags.Format(glm))
	}
	vision := string(files["gen/qwen2vl/vision.go"])
	if !strings.Contains(vision, "MergeOrder: model.Absent") || !strings.Contains(vision, "Merge: c.M, Order: c.M,") {
		t.Errorf("vision glue does not list merge windows together:\n%s", vision)
	}
	if prog := string(files["gen/qwen2vl/program.json"]); !strings.Contains(prog, `"glm4v"`) {
		t.Errorf("program.json does not name the image rule glm4v:\n%s", prog)
	}
	windowed := strings.Replace(src, qwenRule, "image glm4v(patch: P, temporal: TP, merge: M, window: M)", 1)
	if _, diags, _ := compiler.Compile(qwen2VLGraph, []byte(windowed), compiler.Options{Root: ".."}); len(diags) == 0 || !strings.Contains(diags.Format(windowed), "unknown argument window of image rule glm4v") {
		t.Errorf("glm4v took a window: %s", diags.Format(windowed))
	}
}
