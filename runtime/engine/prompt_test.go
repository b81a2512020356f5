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
	pix := image.Config{PatchSize: 14, TemporalPatchSize: 1, MergeSize: 1, LongestEdge: 112}
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
