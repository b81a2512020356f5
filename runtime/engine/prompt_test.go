package engine

import (
	"strings"
	"testing"

	"tfc/runtime/image"
	"tfc/runtime/model"
)

// TestFitsPixtral: Pixtral's processor (raster patches, no merge of its own) fits a family whose
// image rule is pixtral and merges 2×2 in the model, and no other; Qwen2-VL's fits neither it.
func TestFitsPixtral(t *testing.T) {
	pix := image.Config{Rule: image.RulePixtral, PatchSize: 14, TemporalPatchSize: 1, MergeSize: 1, LongestEdge: 112}
	info := model.Info{PixelCols: 3 * 14 * 14, Merge: 2, Image: "pixtral"}
	if err := (&Frontend{Image: pix}).Fits(info); err != nil {
		t.Errorf("Pixtral processor for a pixtral family: %v", err)
	}
	bad := pix
	bad.PatchSize = 16
	if err := (&Frontend{Image: bad}).Fits(info); err == nil || !strings.Contains(err.Error(), "patch_size 16") {
		t.Errorf("patch 16 for a tower of 14: %v", err)
	}
	if err := (&Frontend{Image: image.DefaultConfig()}).Fits(info); err == nil || !strings.Contains(err.Error(), "pixtral") {
		t.Errorf("Qwen2-VL processor for a pixtral family: %v", err)
	}
	qwen := model.Info{PixelCols: 3 * 2 * 14 * 14, Merge: 2, Image: "qwen2_vl"}
	if err := (&Frontend{Image: pix}).Fits(qwen); err == nil {
		t.Error("Pixtral processor for a qwen2_vl family fits")
	}
	if err := (&Frontend{Image: image.DefaultConfig()}).Fits(qwen); err != nil {
		t.Errorf("Qwen2-VL processor for a qwen2_vl family: %v", err)
	}
}

// TestFitsGLM4V: GLM-4V's processor cuts the same patches as Qwen2-VL's, so only the rule's name
// tells them apart; each fits its own family's image rule and not the other's.
func TestFitsGLM4V(t *testing.T) {
	glm, err := image.ParseConfig("g.json", []byte(`{"image_processor_type": "Glm4vImageProcessor"}`))
	if err != nil {
		t.Fatal(err)
	}
	qwen := image.DefaultConfig()
	glmInfo := model.Info{PixelCols: 3 * 2 * 14 * 14, Merge: 2, Image: "glm4v"}
	qwenInfo := model.Info{PixelCols: 3 * 2 * 14 * 14, Merge: 2, Image: "qwen2_vl"}
	if err := (&Frontend{Image: glm}).Fits(glmInfo); err != nil {
		t.Errorf("GLM-4V processor for a glm4v family: %v", err)
	}
	if err := (&Frontend{Image: qwen}).Fits(glmInfo); err == nil || !strings.Contains(err.Error(), "Qwen2-VL's image processor") || !strings.Contains(err.Error(), `"glm4v"`) {
		t.Errorf("Qwen2-VL processor for a glm4v family: %v", err)
	}
	if err := (&Frontend{Image: glm}).Fits(qwenInfo); err == nil || !strings.Contains(err.Error(), "GLM-4V's image processor") || !strings.Contains(err.Error(), `"qwen2_vl"`) {
		t.Errorf("GLM-4V processor for a qwen2_vl family: %v", err)
	}
	merged := glm
	merged.MergeSize = 1
	if err := (&Frontend{Image: merged}).Fits(glmInfo); err == nil || !strings.Contains(err.Error(), "merged 1×1") {
		t.Errorf("GLM-4V processor merging 1×1 for a tower merging 2×2: %v", err)
	}
}
