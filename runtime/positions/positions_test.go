package positions

import (
	"reflect"
	"slices"
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

// The window layouts the oracle recorded for testdata/qwen2.5-vl-tiny (window 4 merged units):
// one window smaller than the window size, two whole windows, and two pictures with ragged
// windows on the right and bottom edges.
func TestWindowLayout(t *testing.T) {
	for _, c := range []struct {
		grids []Grid
		units []int32 // window order → merged unit
		spans []int32
	}{
		{[]Grid{{1, 6, 4}}, []int32{0, 1, 2, 3, 4, 5}, []int32{0, 24}},
		{[]Grid{{1, 8, 16}}, []int32{0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27, 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31}, []int32{0, 64, 128}},
		{[]Grid{{1, 10, 12}, {1, 4, 8}}, []int32{0, 1, 2, 3, 6, 7, 8, 9, 12, 13, 14, 15, 18, 19, 20, 21, 4, 5, 10, 11, 16, 17, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37}, []int32{0, 64, 96, 112, 120, 152}},
	} {
		pos := Vision2D(c.grids, 2)
		w := WindowLayout(c.grids, pos, 2, 4)
		if !slices.Equal(w.Spans, c.spans) {
			t.Errorf("%v: spans %v, want %v", c.grids, w.Spans, c.spans)
		}
		for j, u := range c.units {
			if w.Inverse[u] != int32(j) {
				t.Fatalf("%v: inverse[%d] = %d, want %d", c.grids, u, w.Inverse[u], j)
			}
			for k := int32(0); k < 4; k++ {
				r := 4*j + int(k)
				if w.Order[r] != 4*u+k || w.Pos[2*r] != pos[2*(4*u+k)] || w.Pos[2*r+1] != pos[2*(4*u+k)+1] {
					t.Fatalf("%v: row %d is patch %d at %v, want %d", c.grids, r, w.Order[r], w.Pos[2*r:2*r+2], 4*u+k)
				}
			}
		}
		if len(w.Order) != 4*len(c.units) || len(w.Inverse) != len(c.units) {
			t.Errorf("%v: %d order rows and %d inverse rows for %d units", c.grids, len(w.Order), len(w.Inverse), len(c.units))
		}
	}
}

// TestMergeOrder: a 3×5 grid (odd both ways) keeps a 1×2 grid of 2×2 units, the last row and
// column left out; a second image's rows follow the first's 15.
func TestMergeOrder(t *testing.T) {
	grids := []Grid{{1, 3, 5}, {1, 2, 2}}
	got := MergeOrder(grids, 2)
	want := []int32{0, 1, 5, 6, 2, 3, 7, 8, 15, 16, 17, 18}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MergeOrder = %v, want %v", got, want)
	}
	if n := MergedRows(grids[0], 2) + MergedRows(grids[1], 2); n*4 != len(got) {
		t.Errorf("MergedRows sum %d for %d gathered rows", n, len(got))
	}
	if n := MergedRows(Grid{2, 4, 6}, 2); n != 12 {
		t.Errorf("MergedRows of 2 frames of 4×6 = %d, want 12 (t·h·w/merge²)", n)
	}
}
