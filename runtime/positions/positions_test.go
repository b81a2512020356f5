package positions

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMRoPETextOnly(t *testing.T) {
	pos, delta, err := MRoPE([]int32{5, 6, 7}, nil, 9, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{0, 0, 0, 1, 1, 1, 2, 2, 2}
	if d := cmp.Diff(want, pos); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	if delta != 0 {
		t.Fatalf("delta %d, want 0", delta)
	}
}

func TestMRoPEImage(t *testing.T) {
	// two text tokens, an image of grid 1x4x6 (merge 2: 1x2x3 = 6 tokens), one text token
	ids := []int32{1, 2, 9, 9, 9, 9, 9, 9, 3}
	pos, delta, err := MRoPE(ids, []Grid{{1, 4, 6}}, 9, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []int32{
		0, 0, 0, 1, 1, 1,
		2, 2, 2, 2, 2, 3, 2, 2, 4, 2, 3, 2, 2, 3, 3, 2, 3, 4,
		5, 5, 5,
	}
	if d := cmp.Diff(want, pos); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	if delta != 6-9 {
		t.Fatalf("delta %d, want -3", delta)
	}
	if got := Decode(9, delta); got != [3]int32{6, 6, 6} {
		t.Fatalf("decode position %v", got)
	}
}

func TestMRoPEMismatch(t *testing.T) {
	if _, _, err := MRoPE([]int32{9, 9}, []Grid{{1, 4, 4}}, 9, 2); err == nil {
		t.Fatal("want an error for too few placeholder tokens")
	}
	if _, _, err := MRoPE([]int32{1}, []Grid{{1, 2, 2}}, 9, 2); err == nil {
		t.Fatal("want an error for an image without placeholders")
	}
}

func TestVision2DAndSpans(t *testing.T) {
	got := Vision2D([]Grid{{1, 2, 4}}, 2)
	want := []int32{0, 0, 0, 1, 1, 0, 1, 1, 0, 2, 0, 3, 1, 2, 1, 3}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
	if d := cmp.Diff([]int32{0, 8, 12, 16}, Spans([]Grid{{1, 2, 4}, {2, 2, 2}})); d != "" {
		t.Fatalf("(-want +got)\n%s", d)
	}
}

func TestSequence(t *testing.T) {
	pos, delta, err := Prompt("sequence", []int32{7, 151665, 151665, 151665, 151665, 9}, []Grid{{1, 4, 4}}, 151665, 2)
	if err != nil || delta != 0 {
		t.Fatalf("Prompt(sequence) = _, %d, %v", delta, err)
	}
	for i, p := range pos {
		if p != int32(i) {
			t.Fatalf("row %d has position %d, want %d", i, p, i)
		}
	}
	if _, _, err := Prompt("rope9d", nil, nil, 0, 2); err == nil || !strings.Contains(err.Error(), "mrope, sequence") {
		t.Fatalf("an unknown rule gives %v, want the list of rules", err)
	}
}
