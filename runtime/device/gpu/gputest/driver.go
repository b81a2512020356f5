// Package gputest is a gpu.Driver without a GPU, for tests: device memory is Go byte slices,
// kernels take a set time on a fake clock and compute nothing, graphs replay what was captured,
// and every call is recorded so a test can check what reached the "device" and in what order.
package gputest

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"
	"unsafe"
)

// Call is one recorded driver call.
type Call struct {
	Op     string // the method, e.g. "Launch", "LaunchGraph", "CopyToDevice"
	Kernel string // Launch: the function's symbol
	Grid   [2]uint32
	Params []uint64 // Launch: the argument values, ParamCount of them
	LDS    uint32   // Launch: the dynamic LDS in bytes
	Bytes  int      // copies and memsets: the byte count
}

// Driver is the fake. Its zero value is not usable; call New.
type Driver struct {
	mu sync.Mutex
	// ParamCount gives the number of parameters of a kernel, so Launch can record their values.
	ParamCount map[string]int
	// KernelTime is how long a kernel takes on the fake clock (default 1µs).
	KernelTime map[string]time.Duration
	// Fail, when set, is asked before every call; an error it returns is the call's.
	Fail func(op string) error
	// Quiet keeps no record of calls, for a benchmark's long runs.
	Quiet bool

	calls     []Call
	next      uintptr
	mem       map[uint64][]byte
	bases     []uint64 // mem's keys in order, for span's search
	funcs     map[uintptr]string
	clock     time.Duration
	events    map[uintptr]time.Duration
	capturing bool
	captured  []Call
	graphs    map[uintptr][]Call // graphs and executables alike
	live      map[uintptr]string // handles not destroyed: what they are
}

// New returns a fake with no memory.
func New() *Driver {
	return &Driver{ParamCount: map[string]int{}, KernelTime: map[string]time.Duration{}, next: 0x1000,
		mem: map[uint64][]byte{}, funcs: map[uintptr]string{}, events: map[uintptr]time.Duration{},
		graphs: map[uintptr][]Call{}, live: map[uintptr]string{}}
}

// Calls returns the calls recorded since the last Reset.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]Call(nil), d.calls...)
}

// Ops returns the Op of each recorded call, with the kernel of launches ("Launch k").
func (d *Driver) Ops() []string {
	var ops []string
	for _, c := range d.Calls() {
		if c.Kernel != "" {
			ops = append(ops, c.Op+" "+c.Kernel)
		} else {
			ops = append(ops, c.Op)
		}
	}
	return ops
}

// Count is how many recorded calls have op.
func (d *Driver) Count(op string) int {
	n := 0
	for _, c := range d.Calls() {
		if c.Op == op {
			n++
		}
	}
	return n
}

// Reset forgets the recorded calls.
func (d *Driver) Reset() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = nil
}

// Live lists the handles not yet destroyed or freed, by kind ("stream", "event", "graph", ...).
func (d *Driver) Live() map[string]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[string]int{}
	for _, kind := range d.live {
		out[kind]++
	}
	return out
}

func (d *Driver) handle(kind string) uintptr {
	d.next += 0x100
	d.live[d.next] = kind
	return d.next
}

func (d *Driver) record(c Call) error {
	if d.Fail != nil {
		if err := d.Fail(c.Op); err != nil {
			return err
		}
	}
	if !d.Quiet {
		d.calls = append(d.calls, c)
	}
	return nil
}

func (d *Driver) destroy(h uintptr, kind string) error {
	if d.live[h] != kind {
		return fmt.Errorf("gputest: %s %#x is not live", kind, h)
	}
	delete(d.live, h)
	return nil
}

// span finds the allocation holding [ptr, ptr+n).
func (d *Driver) span(ptr uint64, n int) ([]byte, error) {
	if i, found := slices.BinarySearch(d.bases, ptr); found || i > 0 { // the last base at or below ptr
		if !found {
			i--
		}
		base := d.bases[i]
		if b := d.mem[base]; ptr+uint64(n) <= base+uint64(len(b)) {
			return b[ptr-base : ptr-base+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("gputest: [%#x, +%d) is in no allocation", ptr, n)
}

func (d *Driver) Alloc(bytes uint64) (uint64, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "Alloc", Bytes: int(bytes)}); err != nil {
		return 0, err
	}
	p := uint64(d.handle("memory"))
	d.next += uintptr(bytes+0xff) &^ 0xff
	b := make([]byte, bytes)
	for i := range b {
		b[i] = 0xa5 // not zero, so a missing memset shows
	}
	d.mem[p] = b
	i, _ := slices.BinarySearch(d.bases, p)
	d.bases = slices.Insert(d.bases, i, p)
	return p, nil
}

func (d *Driver) Free(ptr uint64) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "Free"}); err != nil {
		return err
	}
	if _, ok := d.mem[ptr]; ok {
		delete(d.mem, ptr)
		i, _ := slices.BinarySearch(d.bases, ptr)
		d.bases = slices.Delete(d.bases, i, i+1)
	}
	return d.destroy(uintptr(ptr), "memory")
}

func (d *Driver) MemsetAsync(ptr, bytes uint64, stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "MemsetAsync", Bytes: int(bytes)}); err != nil {
		return err
	}
	b, err := d.span(ptr, int(bytes))
	if err != nil {
		return err
	}
	clear(b)
	return nil
}

func (d *Driver) CopyToDevice(dst uint64, host []byte, stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "CopyToDevice", Bytes: len(host)}); err != nil {
		return err
	}
	b, err := d.span(dst, len(host))
	if err != nil {
		return err
	}
	copy(b, host)
	return nil
}

func (d *Driver) CopyToHost(host []byte, src uint64, stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "CopyToHost", Bytes: len(host)}); err != nil {
		return err
	}
	b, err := d.span(src, len(host))
	if err != nil {
		return err
	}
	copy(host, b)
	return nil
}

func (d *Driver) NewStream() (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "NewStream"}); err != nil {
		return 0, err
	}
	return d.handle("stream"), nil
}

func (d *Driver) SyncStream(stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.record(Call{Op: "SyncStream"})
}

func (d *Driver) DestroyStream(stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "DestroyStream"}); err != nil {
		return err
	}
	return d.destroy(stream, "stream")
}

func (d *Driver) LoadModule(image []byte) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "LoadModule", Bytes: len(image)}); err != nil {
		return 0, err
	}
	return d.handle("module"), nil
}

func (d *Driver) UnloadModule(module uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "UnloadModule"}); err != nil {
		return err
	}
	return d.destroy(module, "module")
}

func (d *Driver) Function(module uintptr, symbol string) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "Function", Kernel: symbol}); err != nil {
		return 0, err
	}
	f := d.handle("function")
	d.funcs[f] = symbol
	return f, nil
}

func (d *Driver) Launch(fn uintptr, gridX, gridY, block, lds uint32, params unsafe.Pointer, stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	name, ok := d.funcs[fn]
	if !ok {
		return fmt.Errorf("gputest: launch of unknown function %#x", fn)
	}
	c := Call{Op: "Launch", Kernel: name, Grid: [2]uint32{gridX, gridY}, LDS: lds}
	if n := d.ParamCount[name]; n > 0 {
		for _, p := range unsafe.Slice((**uint64)(params), n) {
			c.Params = append(c.Params, *p)
		}
	}
	if d.capturing {
		if d.Fail != nil {
			if err := d.Fail("CaptureLaunch"); err != nil {
				return err
			}
		}
		d.captured = append(d.captured, c)
		return nil
	}
	if err := d.record(c); err != nil {
		return err
	}
	d.run(c)
	return nil
}

// run advances the clock by the kernel's time.
func (d *Driver) run(c Call) {
	t, ok := d.KernelTime[c.Kernel]
	if !ok {
		t = time.Microsecond
	}
	d.clock += t
}

func (d *Driver) NewEvent() (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "NewEvent"}); err != nil {
		return 0, err
	}
	return d.handle("event"), nil
}

func (d *Driver) RecordEvent(event, stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "RecordEvent"}); err != nil {
		return err
	}
	if d.live[event] != "event" {
		return fmt.Errorf("gputest: record of a dead event %#x", event)
	}
	d.events[event] = d.clock
	return nil
}

func (d *Driver) ElapsedMs(start, stop uintptr) (float32, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "ElapsedMs"}); err != nil {
		return 0, err
	}
	a, ok1 := d.events[start]
	b, ok2 := d.events[stop]
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("gputest: elapsed time of unrecorded events")
	}
	return float32(float64(b-a) / 1e6), nil
}

func (d *Driver) DestroyEvent(event uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "DestroyEvent"}); err != nil {
		return err
	}
	delete(d.events, event)
	return d.destroy(event, "event")
}

func (d *Driver) BeginCapture(stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "BeginCapture"}); err != nil {
		return err
	}
	d.capturing, d.captured = true, nil
	return nil
}

func (d *Driver) EndCapture(stream uintptr) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.capturing {
		return 0, fmt.Errorf("gputest: end of a capture not begun")
	}
	d.capturing = false
	if err := d.record(Call{Op: "EndCapture"}); err != nil {
		return 0, err
	}
	g := d.handle("graph")
	d.graphs[g] = d.captured
	return g, nil
}

func (d *Driver) Instantiate(graph uintptr) (uintptr, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "Instantiate"}); err != nil {
		return 0, err
	}
	e := d.handle("exec")
	d.graphs[e] = d.graphs[graph]
	return e, nil
}

func (d *Driver) LaunchGraph(exec, stream uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "LaunchGraph"}); err != nil {
		return err
	}
	if d.live[exec] != "exec" {
		return fmt.Errorf("gputest: launch of a dead graph %#x", exec)
	}
	for _, c := range d.graphs[exec] {
		d.run(c)
	}
	return nil
}

// Graph returns the launches captured in an executable graph that is live, in capture order.
func (d *Driver) Graphs() [][]Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	var hs []uintptr
	for h, kind := range d.live {
		if kind == "exec" {
			hs = append(hs, h)
		}
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i] < hs[j] })
	var out [][]Call
	for _, h := range hs {
		out = append(out, d.graphs[h])
	}
	return out
}

func (d *Driver) DestroyGraphExec(exec uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "DestroyGraphExec"}); err != nil {
		return err
	}
	delete(d.graphs, exec)
	return d.destroy(exec, "exec")
}

func (d *Driver) DestroyGraph(graph uintptr) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.record(Call{Op: "DestroyGraph"}); err != nil {
		return err
	}
	delete(d.graphs, graph)
	return d.destroy(graph, "graph")
}
