package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"tfc/contracts/sweep"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
	"tfc/runtime/sample"
)

const (
	sweepFile = "../../testdata/sweep/sweep.json"
	sweepRefs = "../../testdata/sweep/refs"
	testdata  = "../../testdata"
)

// sweepRef is tools/oracle/sweep.py's record of one sweep checkpoint.
type sweepRef struct {
	Config       string            `json:"config"`
	SHA256       map[string]string `json:"sha256"`
	MaxNewTokens int               `json:"max_new_tokens"`
	Cases        []sweepCase       `json:"cases"`
}

type sweepCase struct {
	Case      string          `json:"case"`
	Messages  json.RawMessage `json:"messages"`
	Images    []string        `json:"images"`
	PromptIDs []int32         `json:"prompt_ids"`
	Pixels    *struct {
		Shape  []int  `json:"shape"`
		SHA256 string `json:"sha256"`
	} `json:"pixel_values"`
	OutputIDs    []int32      `json:"output_ids"`
	FinishReason string       `json:"finish_reason"`
	Top5         []oracleTop5 `json:"top5"`
	Margins      []float64    `json:"margins"`
}

// tieBound is the top-2 margin below which a greedy step may flip at logits within logitBound
// (twice logitTol of the step's top logit when the reference gives it).
const tieBound = 2 * logitBound

// TestSweepCPU gates every config of the sweep on the CPU: the checkpoint is regenerated from its
// seed byte for byte, and prompt ids, pixels, greedy ids and every step's top-5 logits must be
// the publisher's float64 run's.
func TestSweepCPU(t *testing.T) {
	gateSweep(t, func() (device.Backend, error) { return cpu.New(), nil })
}

// gateSweep runs the sweep gate on backends made by open (one a config).
func gateSweep(t *testing.T, open func() (device.Backend, error)) {
	f, err := sweep.Load(sweepFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Configs {
		t.Run(c.Name, func(t *testing.T) {
			var ref sweepRef
			readJSON(t, filepath.Join(sweepRefs, c.Name+".json"), &ref)
			dir, fe, e := openSweepConfig(t, f, c, ref, open)
			for _, sc := range ref.Cases {
				t.Run(sc.Case, func(t *testing.T) { gateSweepCase(t, fe, e, dir, ref.MaxNewTokens, sc) })
			}
		})
	}
}

// openSweepConfig writes config c's checkpoint from its seed into a temporary folder, checks it
// is the one the oracle ran (ref's sha256), and opens it on a backend made by open.
func openSweepConfig(t *testing.T, f *sweep.File, c sweep.Config, ref sweepRef, open func() (device.Backend, error)) (string, *engine.Frontend, *engine.Engine) {
	t.Helper()
	dir := t.TempDir()
	sums, err := f.Write(c, testdata, dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(ref.SHA256, sums); d != "" {
		t.Fatalf("the checkpoint written from the seed is not the one the oracle ran (-oracle +now):\n%s", d)
	}
	b, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatalf("%s has no tokenizer.json: run make testdata", c.Fixture)
	}
	fe, e := openEngine(t, dir, b, gateLimits)
	return dir, fe, e
}

func gateSweepCase(t *testing.T, fe *engine.Frontend, e *engine.Engine, dir string, maxNew int, sc sweepCase) {
	p := chatPrompt(t, fe, e, filepath.Join(dir, "images"), sc.Images, sc.Messages)
	if d := cmp.Diff(sc.PromptIDs, p.IDs); d != "" {
		t.Fatalf("prompt ids (-publisher +tfc)\n%s", d)
	}
	if sc.Pixels != nil {
		if got := pixelSHA256(p.Pixels); got != sc.Pixels.SHA256 {
			t.Errorf("pixel values (%d floats) are not the processor's %v (sha256 %s, processor %s)", len(p.Pixels), sc.Pixels.Shape, got, sc.Pixels.SHA256)
		}
	}
	var steps [][]float32
	res, err := e.Generate(p, engine.Options{MaxTokens: maxNew, Sample: sample.Params{},
		Step: func(step int, logits []float32) { steps = append(steps, append([]float32(nil), logits...)) }})
	if err != nil {
		t.Fatal(err)
	}
	// Ids must be equal up to a step whose reference margin is a tie at the logit bound.
	n := len(sc.OutputIDs)
	for i := range sc.OutputIDs {
		if i >= len(res.OutputIDs) || res.OutputIDs[i] != sc.OutputIDs[i] {
			tie := tieBound
			if i < len(sc.Top5) && len(sc.Top5[i].Logits) > 0 {
				tie = 2 * logitTol(sc.Top5[i].Logits[0])
			}
			if i < len(sc.Margins) && sc.Margins[i] < tie {
				t.Logf("step %d differs at a tie (publisher's margin %.3g < %.3g); compared up to it", i, sc.Margins[i], tie)
				n = i
				break
			}
			t.Fatalf("greedy ids (-publisher +tfc)\n%s%s", cmp.Diff(sc.OutputIDs, res.OutputIDs),
				firstDifference(oracleCase{OutputIDs: sc.OutputIDs, Margins: sc.Margins}, res.OutputIDs))
		}
	}
	if n == len(sc.OutputIDs) && len(res.OutputIDs) != n {
		t.Fatalf("tfc gave %d ids, the publisher %d: %v", len(res.OutputIDs), n, res.OutputIDs)
	}
	worst := 0.0
	for i := 0; i <= n && i < len(sc.Top5) && i < len(steps); i++ {
		st := sc.Top5[i]
		for k, id := range st.IDs {
			d := math.Abs(float64(steps[i][id]) - st.Logits[k])
			worst = max(worst, d)
			if d > logitTol(st.Logits[k]) {
				t.Errorf("step %d: logit of id %d is %.7f, the publisher's %.7f (bound %.3g)", i, id, steps[i][id], st.Logits[k], logitTol(st.Logits[k]))
			}
		}
	}
	t.Logf("%d prompt ids, %d output ids (%s); top-5 logits within %.3g", len(p.IDs), len(res.OutputIDs), res.FinishReason, worst)
}

// pixelSHA256 is the sha256 of the pixels as little-endian float32, as the oracle hashes them.
func pixelSHA256(px []float32) string {
	b := make([]byte, 4*len(px))
	for i, v := range px {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
