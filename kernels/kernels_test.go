package kernels

import (
	"io/fs"
	"strings"
	"testing"
)

func TestSourcesEmbedded(t *testing.T) {
	for name, want := range map[string]string{
		"tfc_hip.h":     "struct tfc_bf16",
		"tfc_kernels.h": "#include \"tfc_gemm.h\"",
		"tfc_gemm.h":    "tfc_gemm_tile",
		"sample.hip":    "#include \"tfc_kernels.h\"",
	} {
		b, err := fs.ReadFile(Sources, name)
		if err != nil {
			t.Fatalf("%s is not embedded: %v", name, err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
	// a build stages the headers and the generated files side by side, by base name
	names, err := fs.Glob(Sources, "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"qwen2vl.hip", "qwen2vl.schedule.json", "tfc_kernels.h"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("Sources lists %v, without %s", names, want)
		}
	}
}
