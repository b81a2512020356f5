package device

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Schedule is how one generated kernel is launched, made by the compiler beside its source
// (compiler/emit/hip) and read by the GPU backends, which derive nothing from the kernel's text:
// its parameters in order, each naming what it carries, and one grid rule a launch.
type Schedule struct {
	Kernel   string   `json:"kernel"`
	Tile     string   `json:"tile,omitempty"` // what a block computes, for -explain and profiles
	Params   []Param  `json:"params"`
	Launches []Launch `json:"launches"`
}

// ParamKind says what a kernel parameter carries.
type ParamKind string

const (
	ParamPointer ParamKind = "pointer" // the address of the operand's first element
	ParamStride  ParamKind = "stride"  // the operand's row stride in elements
	ParamRows    ParamKind = "rows"    // the operand's row count: the launch's M
	ParamSpans   ParamKind = "spans"   // the operand's column count minus one: an attention's spans S
)

// Param is one kernel parameter and the operand its value comes from.
type Param struct {
	Name  string    `json:"name"`  // C name
	Kind  ParamKind `json:"kind"`  //
	Op    int       `json:"op"`    // index of the kernel's op whose operand it describes
	Field string    `json:"field"` // the operand's field path in the op's struct: "X", "Cache.K"
}

// Launch is one launch of a kernel: Threads a block, grid.x = ceil(M/RowsPerBlock) plus S when
// PlusSpans, grid.y = GridY, or SmallRowsGridY when that is set and M is at most SmallRows; above
// SmallRows and at most MidRows, MidSymbol with grid.x = ceil(M/MidRowsPerBlock).
type Launch struct {
	Symbol         string `json:"symbol"`
	Threads        int    `json:"threads"`
	RowsPerBlock   int    `json:"rows_per_block"`
	PlusSpans      bool   `json:"plus_spans,omitempty"`
	GridY          int    `json:"grid_y"`
	SmallRows      int    `json:"small_rows,omitempty"`
	SmallRowsGridY int    `json:"small_rows_grid_y,omitempty"`
	// SmallSymbol, when set, is the function launched instead at M ≤ SmallRows: the same kernel
	// built for small launches alone, so each layout has its own registers.
	SmallSymbol string `json:"small_symbol,omitempty"`
	// SmallClusterY, when above 1, launches SmallSymbol's blocks in clusters of that many along
	// y where the device has clusters (CUDA sm_90; the function says so itself); SmallRowsGridY
	// is a multiple of it.
	SmallClusterY int `json:"small_cluster_y,omitempty"`
	// MidSymbol, when set, is the function launched at SmallRows < M ≤ MidRows: the same kernel
	// on tiles of MidRowsPerBlock rows, so that a launch of a few dozen rows has blocks enough.
	MidRows         int    `json:"mid_rows,omitempty"`
	MidRowsPerBlock int    `json:"mid_rows_per_block,omitempty"`
	MidSymbol       string `json:"mid_symbol,omitempty"`
	// PagedMMAGridY, when set, is a cached attention's grid.y above SmallRows where the backend
	// built the tensor-core kernel with its own grid (TFC_PAGED_MMA 2, see GridFor): a block a row
	// and that many fewer query heads' worth of blocks.
	PagedMMAGridY int `json:"paged_mma_grid_y,omitempty"`
	// FillSymbol, when set, is the function launched above FillRows rows where the backend runs
	// the fill layout (Layouts.Fill): the same kernel on tiles of FillRowsPerBlock rows by
	// FillGridY column blocks, its stages in FillLDS bytes of dynamic LDS, with the same bits.
	FillRows         int    `json:"fill_rows,omitempty"`
	FillRowsPerBlock int    `json:"fill_rows_per_block,omitempty"`
	FillGridY        int    `json:"fill_grid_y,omitempty"`
	FillLDS          int    `json:"fill_lds,omitempty"`
	FillSymbol       string `json:"fill_symbol,omitempty"`
	// BandSymbol, when set, is the function launched at SmallRows < M ≤ BandRows where the
	// backend runs the band layout (Layouts.Bands): the small-row function's layout on each band
	// of BandRowsPerBlock rows, grid (ceil(M/BandRowsPerBlock), SmallRowsGridY), with the same bits.
	BandRows         int    `json:"band_rows,omitempty"`
	BandRowsPerBlock int    `json:"band_rows_per_block,omitempty"`
	BandSymbol       string `json:"band_symbol,omitempty"`
	// The launch's work, for profiles (a GEMM's TFLOP/s and bytes a second; 0 where the schedule
	// does not say): FlopsPerRow floating-point operations a row of M, WeightBytes read once a
	// launch (weights and bias), RowBytes read and written a row (activations in and out).
	FlopsPerRow int64 `json:"flops_per_row,omitempty"`
	WeightBytes int64 `json:"weight_bytes,omitempty"`
	RowBytes    int64 `json:"row_bytes,omitempty"`
}

// Work is the launch's floating-point operations and bytes moved at M rows (see FlopsPerRow).
func (l Launch) Work(m int) (flops, bytes float64) {
	return float64(l.FlopsPerRow) * float64(m), float64(l.WeightBytes) + float64(l.RowBytes)*float64(m)
}

// Layouts are the optional layouts a backend runs: they change a launch's function and grid,
// never a row's bits.
type Layouts struct {
	PagedMMA bool // a cached attention's tensor-core grid (PagedMMAGridY)
	Fill     bool // the fill functions of launches of many rows (FillSymbol)
	Bands    bool // the band functions of launches of a few dozen rows (BandSymbol)
}

// fill says whether M rows take the launch's fill function on a backend running layouts on.
func (l Launch) fill(m int, on Layouts) bool {
	return on.Fill && l.FillSymbol != "" && m > l.FillRows
}

// band says whether M rows take the launch's band function on a backend running layouts on.
func (l Launch) band(m int, on Layouts) bool {
	return on.Bands && l.BandSymbol != "" && m > l.SmallRows && m <= l.BandRows
}

// mid says whether M rows take the launch's mid-size function.
func (l Launch) mid(m int) bool {
	return l.MidSymbol != "" && m > l.SmallRows && m <= l.MidRows
}

// Function is the symbol launched for M rows.
func (l Launch) Function(m int) string {
	if l.SmallSymbol != "" && m <= l.SmallRows {
		return l.SmallSymbol
	}
	if l.mid(m) {
		return l.MidSymbol
	}
	return l.Symbol
}

// FunctionFor is Function on a backend running layouts on.
func (l Launch) FunctionFor(m int, on Layouts) string {
	if l.fill(m, on) {
		return l.FillSymbol
	}
	if l.band(m, on) {
		return l.BandSymbol
	}
	return l.Function(m)
}

// LDSFor is the dynamic LDS in bytes a launch of M rows passes on a backend running layouts on.
func (l Launch) LDSFor(m int, on Layouts) int {
	if l.fill(m, on) {
		return l.FillLDS
	}
	return 0
}

// Symbols lists every function the launch may run: its own, then its small, mid, fill and band ones.
func (l Launch) Symbols() []string {
	syms := []string{l.Symbol}
	for _, s := range []string{l.SmallSymbol, l.MidSymbol, l.FillSymbol, l.BandSymbol} {
		if s != "" {
			syms = append(syms, s)
		}
	}
	return syms
}

// Grid is the launch's grid for M rows and S spans.
func (l Launch) Grid(m, s int) (x, y int) {
	x = (m + l.RowsPerBlock - 1) / l.RowsPerBlock
	if l.mid(m) {
		x = (m + l.MidRowsPerBlock - 1) / l.MidRowsPerBlock
	}
	if l.PlusSpans {
		x += s
	}
	y = l.GridY
	if l.SmallRowsGridY > 0 && m <= l.SmallRows {
		y = l.SmallRowsGridY
	}
	return x, y
}

// GridFor is Grid on a backend running layouts on: grid.y PagedMMAGridY above SmallRows where it
// built the tensor-core cached attention with its own grid, the fill function's grid above
// FillRows where it runs the fill layout, and the band function's where it runs the band layout.
func (l Launch) GridFor(m, s int, on Layouts) (x, y int) {
	if l.fill(m, on) {
		return (m + l.FillRowsPerBlock - 1) / l.FillRowsPerBlock, l.FillGridY
	}
	if l.band(m, on) {
		return (m + l.BandRowsPerBlock - 1) / l.BandRowsPerBlock, l.SmallRowsGridY
	}
	x, y = l.Grid(m, s)
	if on.PagedMMA && l.PagedMMAGridY > 0 && !(l.SmallRowsGridY > 0 && m <= l.SmallRows) {
		y = l.PagedMMAGridY
	}
	return x, y
}

// Check reports a schedule the launch rule cannot follow.
func (s *Schedule) Check() error {
	if s.Kernel == "" || len(s.Launches) == 0 {
		return fmt.Errorf("schedule of kernel %q: a kernel needs a name and a launch", s.Kernel)
	}
	rows := 0
	for _, p := range s.Params {
		switch p.Kind {
		case ParamPointer, ParamStride, ParamSpans:
		case ParamRows:
			rows++
		default:
			return fmt.Errorf("schedule of kernel %s: parameter %s has kind %q", s.Kernel, p.Name, p.Kind)
		}
		if p.Op < 0 || p.Name == "" || p.Field == "" {
			return fmt.Errorf("schedule of kernel %s: parameter %q names no operand", s.Kernel, p.Name)
		}
	}
	if rows != 1 {
		return fmt.Errorf("schedule of kernel %s: %d parameters carry M; want one", s.Kernel, rows)
	}
	for _, l := range s.Launches {
		if l.Symbol == "" || l.Threads <= 0 || l.RowsPerBlock <= 0 || l.GridY <= 0 || l.SmallRowsGridY < 0 || l.PagedMMAGridY < 0 || l.PagedMMAGridY > l.GridY || (l.SmallRowsGridY > 0) != (l.SmallRows > 0) || (l.SmallSymbol != "" && l.SmallRows == 0) ||
			l.SmallClusterY < 0 || (l.SmallClusterY > 1 && (l.SmallSymbol == "" || l.SmallRowsGridY%l.SmallClusterY != 0)) ||
			(l.MidSymbol != "") != (l.MidRows > 0) || (l.MidSymbol != "") != (l.MidRowsPerBlock > 0) || (l.MidSymbol != "" && (l.MidRows <= l.SmallRows || l.PlusSpans)) ||
			(l.FillSymbol != "") != (l.FillRowsPerBlock > 0) || (l.FillSymbol != "") != (l.FillGridY > 0) || (l.FillSymbol != "") != (l.FillLDS > 0) ||
			(l.FillSymbol != "" && (l.FillRows < l.SmallRows || l.FillRows < l.MidRows || l.PlusSpans)) ||
			(l.BandSymbol != "") != (l.BandRows > 0) || (l.BandSymbol != "") != (l.BandRowsPerBlock > 0) ||
			(l.BandSymbol != "" && (l.SmallSymbol == "" || l.BandRows <= l.SmallRows || l.SmallClusterY > 1 || l.PlusSpans || (l.FillSymbol != "" && l.BandRows > l.FillRows))) {
			return fmt.Errorf("schedule of kernel %s: launch %+v", s.Kernel, l)
		}
	}
	return nil
}

// EncodeSchedules writes schedules as the JSON file that stands beside a family's source: a
// kernel's name and tile on a line, then a line a parameter and a line a launch.
func EncodeSchedules(ss []Schedule) ([]byte, error) {
	var b bytes.Buffer
	item := func(v any, last bool, indent string) error {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		b.WriteString(indent)
		b.Write(data)
		if !last {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
		return nil
	}
	b.WriteString("[\n")
	for i, s := range ss {
		head, err := json.Marshal(struct {
			Kernel string `json:"kernel"`
			Tile   string `json:"tile,omitempty"`
		}{s.Kernel, s.Tile})
		if err != nil {
			return nil, err
		}
		b.Write(head[:len(head)-1])
		b.WriteString(",\n \"params\": [\n")
		for j, p := range s.Params {
			if err := item(p, j == len(s.Params)-1, "  "); err != nil {
				return nil, err
			}
		}
		b.WriteString(" ],\n \"launches\": [\n")
		for j, l := range s.Launches {
			if err := item(l, j == len(s.Launches)-1, "  "); err != nil {
				return nil, err
			}
		}
		b.WriteString(" ]}")
		if i < len(ss)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("]\n")
	return b.Bytes(), nil
}

// DecodeSchedules reads what EncodeSchedules wrote, refusing unknown fields and any schedule
// that Check refuses.
func DecodeSchedules(data []byte) ([]Schedule, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ss []Schedule
	if err := dec.Decode(&ss); err != nil {
		return nil, err
	}
	for i := range ss {
		if err := ss[i].Check(); err != nil {
			return nil, err
		}
	}
	return ss, nil
}

// ScheduleExt ends the name of the schedule file beside a family's .hip: qwen2vl.schedule.json.
const ScheduleExt = ".schedule.json"

// ScheduleFile is the name of the schedule beside the family source named hip ("qwen2vl.hip").
func ScheduleFile(hip string) string { return strings.TrimSuffix(hip, ".hip") + ScheduleExt }

// Source is a family's generated kernels: the HIP text and the schedule of each kernel in it.
type Source struct {
	HIP       []byte
	Schedules []Schedule
}

// Files is s as the two files a family's source is, by name: hip and ScheduleFile(hip).
func (s Source) Files(hip string) (map[string][]byte, error) {
	sched, err := EncodeSchedules(s.Schedules)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{hip: s.HIP, ScheduleFile(hip): sched}, nil
}
