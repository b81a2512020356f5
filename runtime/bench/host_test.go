package bench

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "tfc/gen/registry" // the families
	"tfc/kernels"
	"tfc/runtime/checkpoint"
	"tfc/runtime/checkpoint/checkpointtest"
	"tfc/runtime/device/gpu"
	"tfc/runtime/device/gpu/gputest"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// hostLayers is the decoder depth of Qwen2-VL-2B and dots.ocr: a round's launches are those of
// the full-size model, its sizes the tiny fixture's.
const hostLayers = 28

// BenchmarkHostRound measures the host's own work a decode round: a 28-layer Qwen2-VL-shaped
// checkpoint runs decode rounds of B rows on the GPU backend over the fake driver, whose kernels
// take no time, so a round's time is the forward's glue, the launches' marshalling (or a tape's
// play), graph lookup and replay, the round's input writes, the thread hand-over, and either
// the logits read and the greedy pick of each row here, or (picks=true) the read of the picks
// the graph's argmax took on the device. Run with
// go test ./runtime/bench -run '^$' -bench HostRound -benchtime 2000x.
func BenchmarkHostRound(b *testing.B) {
	dir := deepCheckpoint(b, "../../testdata/qwen2-vl-tiny", hostLayers)
	for _, c := range []struct{ tapes, picks bool }{{true, true}, {true, false}, {false, false}} {
		tapes := c.tapes
		for _, batch := range []int{1, 8} {
			b.Run(fmt.Sprintf("tapes=%v/picks=%v/batch%d", tapes, c.picks, batch), func(b *testing.B) {
				be := fakeGPU(b, !tapes)
				e, err := engine.Open(dir, be, model.Limits{Parallel: batch, Context: 256, Rows: 64, Patches: 1024, PageSize: 16})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				r := decodeRound(e.Info, batch, 16, 200)
				r.Greedy = c.picks
				round := func() {
					logits, err := e.Model.Forward(r)
					if err != nil {
						b.Fatal(err)
					}
					if c.picks { // the device's picks, read back instead of the logits
						copy(r.Tokens, r.Picks)
						return
					}
					for i := range batch {
						r.Tokens[i] = int32(sample.Greedy(logits[i*e.Info.Vocab : (i+1)*e.Info.Vocab]))
					}
				}
				round() // the first round of a shape records its tape
				before := be.Launches()
				b.ResetTimer()
				for b.Loop() {
					round()
				}
				b.StopTimer()
				after := be.Launches()
				if tapes && after.Taped == before.Taped {
					b.Fatalf("no launch was played from a tape: %+v", after)
				}
				if after.Replayed == before.Replayed {
					b.Fatalf("no launch was replayed by a graph: %+v", after)
				}
			})
		}
	}
}

// decodeRound is a round of b decode rows, one a sequence at position pos, pages pages a slot.
func decodeRound(info model.Info, b, pages, pos int) *model.Round {
	r := &model.Round{PageTable: make([]int32, b*pages)}
	for i := range b {
		r.Tokens = append(r.Tokens, int32(i))
		for range info.PositionAxes {
			r.Positions = append(r.Positions, int32(pos))
		}
		r.Seq = append(r.Seq, int32(i))
		r.Pos = append(r.Pos, int32(pos))
		r.LogitRows = append(r.LogitRows, int32(i))
		for p := range pages {
			r.PageTable[i*pages+p] = int32(i*pages + p)
		}
	}
	return r
}

// fakeGPU is the GPU backend over a quiet fake driver with the embedded kernel sources.
func fakeGPU(b testing.TB, noTapes bool) *gpu.Backend {
	lib, err := gpu.NewLibrary("fake", kernels.Sources)
	if err != nil {
		b.Fatal(err)
	}
	d := gputest.New()
	d.Quiet = true
	be, err := gpu.NewBackend(gpu.Config{Name: "fake", Driver: d, Thread: gpu.NewThread(), Library: lib, Image: "image",
		Build: func(fs.FS, string) ([]byte, error) { return []byte("image"), nil }, NoTapes: noTapes})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}

// deepCheckpoint copies the checkpoint in src with its decoder's last layer repeated up to
// layers layers, into a temporary folder.
func deepCheckpoint(b testing.TB, src string, layers int) string {
	dir := b.TempDir()
	ck, err := checkpoint.Open(src)
	if err != nil {
		b.Fatal(err)
	}
	defer ck.Close()
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err == nil {
		err = json.Unmarshal(raw, &cfg)
	}
	if err != nil {
		b.Fatal(err)
	}
	text := cfg["text_config"].(map[string]any)
	have := int(text["num_hidden_layers"].(float64))
	text["num_hidden_layers"] = layers
	delete(text, "layer_types")
	last := fmt.Sprintf("model.layers.%d.", have-1)
	var out []checkpointtest.Tensor
	for _, name := range ck.Names() {
		t, err := ck.Tensor(name)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, checkpointtest.Tensor{Name: name, DType: t.DType.String(), Shape: t.Shape, Data: t.Data})
		if rest, ok := strings.CutPrefix(name, last); ok {
			for l := have; l < layers; l++ {
				out = append(out, checkpointtest.Tensor{Name: fmt.Sprintf("model.layers.%d.%s", l, rest), DType: t.DType.String(), Shape: t.Shape, Data: t.Data})
			}
		}
	}
	checkpointtest.WriteFile(b, dir, "model.safetensors", checkpointtest.Safetensors(out, map[string]string{"format": "pt"}))
	checkpointtest.WriteJSON(b, dir, "config.json", cfg)
	for _, f := range []string{"generation_config.json", "tokenizer_config.json", "chat_template.json", "preprocessor_config.json"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			b.Fatal(err)
		}
		checkpointtest.WriteFile(b, dir, f, data)
	}
	return dir
}
