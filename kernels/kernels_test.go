package kernels

import (
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
		b, err := Sources.ReadFile(name)
		if err != nil {
			t.Fatalf("%s is not embedded: %v", name, err)
		}
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %q", name, want)
		}
	}
}
