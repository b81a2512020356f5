// Package engine ties a checkpoint to its generated family and runs generation on one backend:
// open and validate the checkpoint, bind the family, load weights, then vision, prompt fill and
// decode rounds.
package engine

import (
	"context"
	"fmt"
	"strings"

	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
	"tfc/runtime/lanes"
	"tfc/runtime/model"
	"tfc/runtime/positions"
	"tfc/runtime/sample"
)

// Engine is a loaded checkpoint.
type Engine struct {
	Dir    string
	Ckpt   *checkpoint.Checkpoint
	Family *model.Family
	Bound  model.Bound
	Model  model.Model
	Info   model.Info
	Limits model.Limits
	EOS    map[int]bool
}

// Bind picks the family serving a config.json and binds it: an unsupported value is refused by
// name, with the family's graph.
func Bind(cfg *checkpoint.Config) (*model.Family, model.Bound, error) {
	fam, err := model.Pick(cfg.ModelType(), cfg.Architectures())
	if err != nil {
		return nil, nil, err
	}
	bound, err := fam.Bind(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", fam.Graph, err)
	}
	return fam, bound, nil
}

// Validate opens a checkpoint and checks it against its family's manifest; nothing is allocated
// for weights. The caller closes the returned checkpoint.
func Validate(dir string) (*checkpoint.Checkpoint, *model.Family, model.Bound, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, nil, nil, err
	}
	fam, bound, err := Bind(ck.Config)
	if err != nil {
		ck.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	names := map[string]bool{}
	for _, n := range ck.Names() {
		names[n] = true
	}
	if err := bound.Resolve(func(name string) bool { return names[name] }); err != nil {
		ck.Close()
		return nil, nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	if probs := ck.Check(Manifest(bound)); len(probs) > 0 {
		ck.Close()
		return nil, nil, nil, fmt.Errorf("checkpoint %s does not match family %s:\n  %s", dir, fam.Name,
			strings.ReplaceAll(checkpoint.Problems(probs).Error(), "\n", "\n  "))
	}
	return ck, fam, bound, nil
}

// Manifest converts a bound family's manifest to the checkpoint's spec type.
func Manifest(b model.Bound) []checkpoint.TensorSpec {
	var specs []checkpoint.TensorSpec
	for _, t := range b.Manifest() {
		specs = append(specs, checkpoint.TensorSpec{Name: t.Name, Shape: t.Shape})
	}
	return specs
}

// Open validates a checkpoint and loads it onto b.
func Open(dir string, b device.Backend, l model.Limits) (*Engine, error) {
	return OpenProgress(dir, b, l, nil)
}

// OpenProgress is Open that reports the weight bytes read so far and the total to progress.
func OpenProgress(dir string, b device.Backend, l model.Limits, progress func(done, total int64)) (*Engine, error) {
	ck, fam, bound, err := Validate(dir)
	if err != nil {
		return nil, err
	}
	var done int64
	total := ck.TotalBytes()
	get := func(name string) ([]byte, device.DType, error) {
		t, err := ck.Tensor(name)
		if err != nil {
			return nil, 0, err
		}
		if progress != nil {
			done += int64(len(t.Data))
			progress(done, total)
		}
		switch t.DType {
		case checkpoint.BF16:
			return t.Data, device.BF16, nil
		case checkpoint.F16:
			return t.Data, device.F16, nil
		case checkpoint.F32:
			return t.Data, device.F32, nil
		}
		return nil, 0, fmt.Errorf("%s: tensor %s has dtype %v; tfc reads BF16, F16 and F32", t.File, name, t.DType)
	}
	m, err := bound.Load(b, l, get)
	if err != nil {
		ck.Close()
		return nil, fmt.Errorf("loading %s: %w", dir, err)
	}
	e := &Engine{Dir: dir, Ckpt: ck, Family: fam, Bound: bound, Model: m, Info: m.Info(), Limits: l, EOS: map[int]bool{}}
	if ck.Generation != nil {
		for _, id := range ck.Generation.EOS {
			e.EOS[id] = true
		}
	}
	return e, nil
}

// Close releases the model and the checkpoint's memory maps.
func (e *Engine) Close() {
	e.Model.Close()
	e.Ckpt.Close()
}

// Prompt is a tokenized prompt with its images' patches: ids hold one placeholder id per vision
// row already (the processor's expansion).
type Prompt struct {
	IDs    []int32
	Pixels []float32        // all images' patches, [N, C] row-major
	Grids  []positions.Grid // (t, h, w) in patches, per image
}

// Options bound and steer one generation.
type Options struct {
	MaxTokens int
	Sample    sample.Params
	// Step, when set, sees each step's logits before the token is picked (a copy keeps them).
	Step func(step int, logits []float32)
}

// Result is one generation's output.
type Result struct {
	OutputIDs    []int32
	FinishReason string // "stop" at an EOS id, "length" at MaxTokens or the context
	VisionRows   []float32
}

// Generate runs one sequence alone: the lanes scheduler with one lane, no drafts and no prompt
// cache, so it takes the path every served request takes.
func (e *Engine) Generate(p Prompt, o Options) (*Result, error) {
	var eos []int32
	for id := range e.EOS {
		eos = append(eos, int32(id))
	}
	s, err := lanes.New(e.Model, lanes.Config{Parallel: 1, Context: e.Limits.Context, Rows: e.Limits.Rows,
		PageSize: e.Limits.PageSize, EOS: eos, MaxPatches: e.Limits.Patches})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res := &Result{}
	n := len(p.IDs)
	req := &lanes.Request{Prompt: p.IDs, Pixels: p.Pixels, Grids: p.Grids, MaxTokens: o.MaxTokens, Sample: o.Sample,
		Vision: func(rows []float32) { res.VisionRows = rows }}
	if o.Step != nil {
		req.Logits = func(pos int, logits []float32) { o.Step(pos-n, logits) }
	}
	st, err := s.Submit(context.Background(), req)
	if err != nil {
		return nil, err
	}
	for ev := range st.Events {
		res.OutputIDs = append(res.OutputIDs, ev.Tokens...)
		if ev.Done {
			if ev.Err != nil {
				return nil, ev.Err
			}
			res.FinishReason = ev.Finish
			break
		}
	}
	return res, nil
}
