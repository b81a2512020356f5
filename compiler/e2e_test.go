package compiler_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	_ "tfc/gen/registry"
	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/model"
)

// The generated Qwen2-VL glue on the CPU backend against transformers' outputs on the oracle's
// tiny checkpoint: the vision rows and the greedy ids of every case.

const tinyDir = "../testdata/qwen2-vl-tiny"

type oracleCase struct {
	PromptIDs   []int32   `json:"prompt_ids"`
	Grids       [][3]int  `json:"image_grid_thw"`
	PositionIDs [][]int32 `json:"position_ids"`
	RopeDeltas  int32     `json:"rope_deltas"`
	OutputIDs   []int32   `json:"output_ids"`
}

// readSafetensors reads the F32 tensors of a small safetensors file.
func readSafetensors(t *testing.T, path string) map[string][]float32 {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(data)
	var header map[string]struct {
		DType   string `json:"dtype"`
		Offsets [2]int `json:"data_offsets"`
	}
	if err := json.Unmarshal(data[8:8+n], &header); err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	body := data[8+n:]
	for name, h := range header {
		if h.DType != "F32" {
			continue
		}
		raw := body[h.Offsets[0]:h.Offsets[1]]
		v := make([]float32, len(raw)/4)
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		out[name] = v
	}
	return out
}

func loadTiny(t *testing.T) model.Model {
	if _, err := os.Stat(filepath.Join(tinyDir, "config.json")); err != nil {
		t.Skip("the oracle's tiny checkpoint is absent")
	}
	ck, err := checkpoint.Open(tinyDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	fam, err := model.Pick(ck.ModelType(), ck.Architectures())
	if err != nil {
		t.Fatal(err)
	}
	bound, err := fam.Bind(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	dtypes := map[checkpoint.DType]device.DType{checkpoint.BF16: device.BF16, checkpoint.F16: device.F16, checkpoint.F32: device.F32}
	m, err := bound.Load(cpu.New(), model.Limits{Context: 128, Parallel: 3, Rows: 128, Patches: 256, PageSize: 16},
		func(name string) ([]byte, device.DType, error) {
			x, err := ck.Tensor(name)
			if err != nil {
				return nil, 0, err
			}
			return x.Data, dtypes[x.DType], nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func argmax(v []float32) int32 {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return int32(best)
}

func TestTinyQwen2VLGreedy(t *testing.T) {
	m := loadTiny(t)
	info := m.Info()
	for _, name := range []string{"text", "image1", "image2"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(tinyDir, "oracle", name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var c oracleCase
			if err := json.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			tensors := readSafetensors(t, filepath.Join(tinyDir, "oracle", name+".safetensors"))
			var imageRows []float32
			if len(c.Grids) > 0 {
				imageRows, err = m.Vision(tensors["pixel_values"], c.Grids)
				if err != nil {
					t.Fatal(err)
				}
				want := tensors["vision_rows"]
				if len(want) != len(imageRows) {
					t.Fatalf("vision rows: %d values, want %d", len(imageRows), len(want))
				}
				worst := 0.0
				for i := range want {
					worst = math.Max(worst, math.Abs(float64(imageRows[i]-want[i])))
				}
				t.Logf("vision rows: max abs diff %.3g", worst)
				if worst > 1e-3 {
					t.Errorf("vision rows differ from transformers' by %.3g", worst)
				}
			}
			T := len(c.PromptIDs)
			r := &model.Round{Tokens: c.PromptIDs, LogitRows: []int32{int32(T - 1)}, ImageRows: imageRows}
			for i, id := range c.PromptIDs {
				for a := 0; a < 3; a++ {
					r.Positions = append(r.Positions, c.PositionIDs[a][i])
				}
				r.Seq = append(r.Seq, 0)
				r.Pos = append(r.Pos, int32(i))
				if int(id) == info.ImageToken {
					r.ImageAt = append(r.ImageAt, int32(i))
				}
			}
			maxPages := (128 + 15) / 16
			for p := 0; p < 3*maxPages; p++ {
				r.PageTable = append(r.PageTable, int32(p))
			}
			var got []int32
			for k := 0; k < len(c.OutputIDs); k++ {
				logits, err := m.Forward(r)
				if err != nil {
					t.Fatal(err)
				}
				next := argmax(logits[:info.Vocab])
				got = append(got, next)
				p := int32(T+k) + c.RopeDeltas
				r = &model.Round{Tokens: []int32{next}, Positions: []int32{p, p, p}, Seq: []int32{0}, Pos: []int32{int32(T + k)},
					PageTable: r.PageTable, LogitRows: []int32{0}}
			}
			for i := range c.OutputIDs {
				if got[i] != c.OutputIDs[i] {
					t.Fatalf("greedy ids %v, want %v (first difference at step %d)", got, c.OutputIDs, i)
				}
			}
		})
	}
}

// TestTinyQwen2VLBatched runs the three oracle cases side by side, each in its own sequence
// slot, every round carrying rows of all of them: the greedy ids must be the ones each case
// gets alone.
func TestTinyQwen2VLBatched(t *testing.T) {
	m := loadTiny(t)
	info := m.Info()
	names := []string{"text", "image1", "image2"}
	const slots, maxPages = 3, (128 + 15) / 16
	var cases []oracleCase
	r := &model.Round{}
	for p := 0; p < slots*maxPages; p++ {
		r.PageTable = append(r.PageTable, int32(slots*maxPages-1-p)) // pages handed out backwards
	}
	for slot, name := range names {
		raw, err := os.ReadFile(filepath.Join(tinyDir, "oracle", name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var c oracleCase
		if err := json.Unmarshal(raw, &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
		if len(c.Grids) > 0 {
			tensors := readSafetensors(t, filepath.Join(tinyDir, "oracle", name+".safetensors"))
			rows, err := m.Vision(tensors["pixel_values"], c.Grids)
			if err != nil {
				t.Fatal(err)
			}
			r.ImageRows = append(r.ImageRows, rows...)
		}
		base := len(r.Tokens)
		for i, id := range c.PromptIDs {
			r.Tokens = append(r.Tokens, id)
			for a := 0; a < 3; a++ {
				r.Positions = append(r.Positions, c.PositionIDs[a][i])
			}
			r.Seq = append(r.Seq, int32(slot))
			r.Pos = append(r.Pos, int32(i))
			if int(id) == info.ImageToken {
				r.ImageAt = append(r.ImageAt, int32(base+i))
			}
		}
		r.LogitRows = append(r.LogitRows, int32(len(r.Tokens)-1))
	}
	longest := 0
	for _, c := range cases {
		longest = max(longest, len(c.OutputIDs))
	}
	got := make([][]int32, len(cases))
	for k := 0; k < longest; k++ {
		logits, err := m.Forward(r)
		if err != nil {
			t.Fatal(err)
		}
		// every case decodes a row each round; a finished case's rows are not checked
		next := &model.Round{PageTable: r.PageTable}
		for j, c := range cases {
			id := argmax(logits[j*info.Vocab : (j+1)*info.Vocab])
			got[j] = append(got[j], id)
			T := len(c.PromptIDs)
			p := int32(T+k) + c.RopeDeltas
			next.Tokens = append(next.Tokens, id)
			next.Positions = append(next.Positions, p, p, p)
			next.Seq = append(next.Seq, int32(j))
			next.Pos = append(next.Pos, int32(T+k))
			next.LogitRows = append(next.LogitRows, int32(j))
		}
		r = next
	}
	for j, c := range cases {
		for i := range c.OutputIDs {
			if got[j][i] != c.OutputIDs[i] {
				t.Fatalf("%s batched: greedy ids %v, want %v (first difference at step %d)", names[j], got[j], c.OutputIDs, i)
			}
		}
	}
}
