// Package model is the registry of generated families and the interface their glue implements.
// Families register themselves by Hugging Face model_type from their generated package's init;
// nothing in runtime imports a generated package.
package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
)

// Family is what a generated package registers.
type Family struct {
	Name          string     // the .graph family name, e.g. "qwen2_vl"
	ModelTypes    []string   // config.json model_type values it serves
	Architectures []string   // config.json architectures it serves
	Graph         string     // source file, e.g. "graphs/qwen2_vl.graph"
	OCR           *OCR       // how a document page is read (/v1/ocr); nil when the graph names no OCR prompt
	Kernels       string     // its HIP source's name, kernels/gen/KERNELS.hip
	KernelsPage   int        // the KV cache page rows the committed kernels are built for (0: none were)
	Prefixes      []Prefix   // weight-name prefixes with their alternatives
	Program       []byte     // the compiled program: config values, description, kernels
	Graphs        []GraphDef // the runners of the graphs it runs, as its program lists them
	// Bind reads and checks config.json values (refusing unsupported ones by name) and returns
	// the family's bound configuration.
	Bind func(cfg Config) (Bound, error)
}

// OCR is how a family reads a document page, from its graph's ocr_prompt and ocr_dpi.
type OCR struct {
	Prompt string    // the user text sent after a page's image
	Tasks  []OCRTask // the graph's labelled prompts, which a request picks by name
	DPI    int       // the resolution a PDF page is rendered at
}

// OCRTask is one labelled ocr_prompt of a family's graph.
type OCRTask struct {
	Name   string
	Prompt string
}

// Task gives the prompt a task name picks; false when the family has no such task.
func (o *OCR) Task(name string) (string, bool) {
	for _, t := range o.Tasks {
		if t.Name == name {
			return t.Prompt, true
		}
	}
	return "", false
}

// Config is the read access the generated glue needs to a checkpoint's config.json.
type Config = checkpoint.Values

// TensorSpec is one entry of a family's weight manifest.
type TensorSpec struct {
	Name  string
	Shape []int
}

// Bound is a family bound to one checkpoint's config: its constants, manifest and memory plan.
type Bound interface {
	// Values lists the bound config values by graph name, in declaration order, for inspect.
	Values() []Value
	// Resolve picks each name prefix's alternative by which tensors the checkpoint has; call it
	// before Manifest.
	Resolve(has func(name string) bool) error
	// Manifest lists every tensor the checkpoint must hold.
	Manifest() []TensorSpec
	// Plan gives the bytes the activations and caches need at the given limits.
	Plan(l Limits) Plan
	// Load uploads weights (read through get) to the backend and returns a runnable model.
	Load(b device.Backend, l Limits, get func(name string) (data []byte, dt device.DType, err error)) (Model, error)
}

// Value is a bound config value for display.
type Value struct {
	Name, Path string
	Value      any
}

// Limits bound the shapes a loaded model must handle.
type Limits struct {
	Context  int // tokens per sequence
	Parallel int // sequences at once
	Rows     int // rows per forward round (prompt chunk + decode rows)
	Patches  int // vision patches per vision call
	PageSize int // KV cache page rows
}

// Plan is a memory plan evaluated at some limits, in bytes.
type Plan struct {
	Weights     int64
	Activations int64
	KVCache     int64
	Buffers     []PlanBuffer
}

// PlanBuffer is one planned buffer.
type PlanBuffer struct {
	Name  string
	Bytes int64
}

// Info is what the runtime needs to know of a loaded family.
type Info struct {
	Vocab        int
	Hidden       int    // rows scattered from vision into the decoder have this width
	ImageToken   int    // id of the placeholder token each vision row replaces
	VisionStart  int    // id that opens an image's placeholder run
	Merge        int    // spatial merge of the vision tower (rows per image = t*h*w/Merge²)
	PixelCols    int    // values per patch row the vision tower reads (0 without one)
	Positions    string // the position rule named in the graph, e.g. "mrope"
	PositionAxes int    // axes per row of the position rule (3 for M-RoPE)
	Image        string // the image processor rule named in the graph
	Layers       int    // decoder layers (KV caches)
	KVWidth      int    // KVHeads*HeadDim per cache row
}

// Round is one decoder forward over rows of one or more sequences.
type Round struct {
	Tokens    []int32   // [R]
	Positions []int32   // [R*PositionAxes], row-major
	Seq       []int32   // [R] each row's sequence slot
	Pos       []int32   // [R] each row's cache position
	PageTable []int32   // [Parallel*MaxPages] page of each slot's page index
	ImageRows []float32 // [n*Hidden] vision rows to place at ImageAt
	ImageAt   []int32   // [n] row index receiving each vision row
	LogitRows []int32   // rows whose logits are returned, in order
	// Greedy asks for each logit row's greedy pick (sample.Greedy's rule, taken on the device)
	// in Picks instead of the logits: one small read a round where no row is sampled or seen.
	Greedy bool
	Picks  []int32 // [len(LogitRows)] with Greedy, set by Forward
}

// Model is a family loaded on a backend.
type Model interface {
	Info() Info
	// Vision runs the tower on pixels [N, C] of the given (t, h, w) grids and returns
	// [N/Merge², Hidden] rows.
	Vision(pixels []float32, grids [][3]int) ([]float32, error)
	// Forward runs one round and returns logits [len(LogitRows), Vocab], which the model may
	// overwrite at its next Forward (rounds run one at a time; keep a copy to keep them). With
	// r.Greedy a model may instead set r.Picks and return no logits.
	Forward(r *Round) ([]float32, error)
	Close()
}

var (
	mu       sync.Mutex
	families []*Family
)

// Register adds a generated family.
func Register(f *Family) {
	mu.Lock()
	defer mu.Unlock()
	families = append(families, f)
}

// Families lists the registered families by name.
func Families() []*Family {
	mu.Lock()
	defer mu.Unlock()
	out := append([]*Family(nil), families...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Pick finds the family serving a checkpoint's model_type or architectures.
func Pick(modelType string, architectures []string) (*Family, error) {
	var known []string
	fs := Families()
	for _, f := range fs { // a model_type match wins over any family's architecture match
		if slices.Contains(f.ModelTypes, modelType) {
			return f, nil
		}
	}
	for _, f := range fs {
		for _, b := range architectures {
			if slices.Contains(f.Architectures, b) {
				return f, nil
			}
		}
		known = append(known, strings.Join(append(append([]string{}, f.ModelTypes...), f.Architectures...), "/"))
	}
	return nil, fmt.Errorf("model_type %q (architectures %v) is not supported; supported: %s",
		modelType, architectures, strings.Join(known, ", "))
}
