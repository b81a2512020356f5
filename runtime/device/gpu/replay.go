package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"runtime"
	"time"
	"unsafe"

	"tfc/runtime/device"
	"tfc/runtime/internal/lru"
)

// defaultRunLen is how many launches a pending run holds before it is handed to the driver. Runs
// of a whole decode round kept the device idle while the host prepared the round: on the H200 a
// batch-1 round took 9.4 ms so, 8.3 ms without graphs, 8.0–8.4 ms in runs of 24 to 64 launches.
const defaultRunLen = 64

// maxRun bounds the run length TFC_GPU_GRAPH_RUN may set.
const maxRun = 4096

// minGraphRun is the shortest run worth a graph.
const minGraphRun = 2

// graphCacheSize is how many graphs a backend keeps; the least recently used goes first.
const graphCacheSize = 32

// maxSeen bounds the keys remembered as flushed once.
const maxSeen = 4096

// pendingLaunch is one kernel launch of a run; its parameters are vals[off:off+n] of the run.
type pendingLaunch struct {
	name         string // symbol with the launch's suffix
	fn           uintptr
	gridX, gridY uint32
	threads, lds uint32
	off, n       int
	flops, bytes float64 // the launch's work, for profiles
}

// run is a sequence of launches not yet handed to the driver, and its signature: the bytes of
// every launch's function, grid and parameter values, which two runs must share to be replayed
// by one graph. Once sealed it also holds the signature's hash and a pointer to each value.
type run struct {
	launches []pendingLaunch
	vals     []uint64
	sig      []byte
	key      uint64
	ptrs     []uintptr
}

// seal hashes the signature and points at each value, for the launches' parameter arrays.
func (r *run) seal() {
	r.key = maphash.Bytes(sigSeed, r.sig)
	if len(r.vals) == 0 {
		r.vals = append(r.vals, 0) // something to pin
	}
	r.ptrs = make([]uintptr, len(r.vals))
	for i := range r.vals {
		r.ptrs[i] = uintptr(unsafe.Pointer(&r.vals[i]))
	}
}

// add appends the launches of c.
func (r *run) add(c *Call) {
	off := len(r.vals)
	r.vals = append(r.vals, c.Values...)
	for i, g := range c.Grids {
		if g.X <= 0 || g.Y <= 0 {
			continue
		}
		l := pendingLaunch{g.Symbol, c.Funcs[i], uint32(g.X), uint32(g.Y), uint32(g.Threads), uint32(g.LDS), off, len(c.Values), g.Flops, g.Bytes}
		r.launches = append(r.launches, l)
		r.sig = binary.LittleEndian.AppendUint64(r.sig, uint64(l.fn))
		r.sig = binary.LittleEndian.AppendUint32(r.sig, l.gridX)
		r.sig = binary.LittleEndian.AppendUint32(r.sig, l.gridY)
		r.sig = binary.LittleEndian.AppendUint32(r.sig, l.lds)
		r.sig = binary.LittleEndian.AppendUint32(r.sig, uint32(l.n))
		for _, v := range c.Values {
			r.sig = binary.LittleEndian.AppendUint64(r.sig, v)
		}
	}
}

// Launch adds the launches of one generated kernel (its parameters marshalled by the rule of
// compiler/emit/hip, its grid by the same rule as the kernel's launches) to the pending run.
// An error of an earlier launch is returned here or by the next call.
func (be *Backend) Launch(k *device.KernelRef, ops ...device.Op) error {
	c, err := be.lib.Prepare(k, ops, be.address, (*loader)(be))
	if err != nil {
		return err
	}
	if err := be.lock(); err != nil {
		return err
	}
	defer be.mu.Unlock()
	be.pending.add(c)
	if len(be.pending.launches) >= be.cfg.RunLen || be.cfg.NoGraphs || be.timing {
		// without graph replay, holding launches back gains nothing: the device may start now
		return be.wrap(be.flushLocked())
	}
	return nil
}

// LaunchCounts say how launches reached the device.
type LaunchCounts struct {
	Replayed int64 // launches run by graph replay
	Taped    int64 // launches played from a tape (each also counted as replayed or plain)
	Plain    int64 // launches made one by one
	Graphs   int   // graphs captured
	Failed   int   // runs whose capture or instantiation failed (launched one by one instead)

	Waited time.Duration // time the host spent blocked until the stream finished (Sync, and reads' copies)
}

// Launches are the backend's launch counts so far.
func (be *Backend) Launches() LaunchCounts {
	var c LaunchCounts
	if err := be.Do(func() error { c = be.counts; return nil }); err != nil && !isStopped(err) {
		be.th.keep(err)
	}
	c.Waited = be.Waited()
	return c
}

// Waited is the time the host has spent blocked until the stream finished, read without waiting
// for the thread.
func (be *Backend) Waited() time.Duration { return time.Duration(be.waited.Load()) }

// submit hands a run to the driver on the thread: timed when profiling, else replayed by a
// graph when an identical run has a graph, captured when an identical run was seen once before,
// else launched one by one.
func (be *Backend) submit(r *run) error {
	ptrs := r.ptrs
	var pin runtime.Pinner
	pin.Pin(&r.vals[0])
	defer pin.Unpin()
	n := int64(len(r.launches))
	if be.profiling {
		be.counts.Plain += n
		return be.launchTimed(r, ptrs)
	}
	if be.cfg.NoGraphs || len(r.launches) < minGraphRun {
		be.counts.Plain += n
		return be.launchPlain(r, ptrs)
	}
	key := r.key
	g := be.graphs.get(key, r.sig)
	if g == nil && be.graphs.seen[key] == seenOnce {
		var err error
		if g, err = be.capture(r, ptrs); err != nil {
			be.graphs.see(key, captureFailed)
			be.counts.Failed++
		} else {
			be.counts.Graphs++
			if err := be.graphs.add(key, g, be.evict); err != nil {
				be.drv.DestroyGraphExec(g.exec)
				be.drv.DestroyGraph(g.graph)
				return err
			}
		}
	}
	if g == nil {
		if be.graphs.seen[key] == 0 {
			be.graphs.see(key, seenOnce)
		}
		be.counts.Plain += n
		return be.launchPlain(r, ptrs)
	}
	be.counts.Replayed += n
	if err := be.drv.LaunchGraph(g.exec, be.stream); err != nil {
		return fmt.Errorf("%w: a graph of %d launches (%s first)", err, len(r.launches), r.launches[0].name)
	}
	return nil
}

var sigSeed = maphash.MakeSeed()

func params(ptrs []uintptr, l pendingLaunch) unsafe.Pointer {
	if l.n == 0 {
		return nil
	}
	return unsafe.Pointer(&ptrs[l.off])
}

// launchOne queues one launch on the stream.
func (be *Backend) launchOne(l pendingLaunch, ptrs []uintptr) error {
	if err := be.drv.Launch(l.fn, l.gridX, l.gridY, l.threads, l.lds, params(ptrs, l), be.stream); err != nil {
		return fmt.Errorf("%w: kernel %s grid (%d,%d)", err, l.name, l.gridX, l.gridY)
	}
	return nil
}

func (be *Backend) launchPlain(r *run, ptrs []uintptr) error {
	for _, l := range r.launches {
		if err := be.launchOne(l, ptrs); err != nil {
			return err
		}
	}
	return nil
}

// capture records the run's launches into a graph and instantiates it; on failure nothing is
// left captured or allocated.
func (be *Backend) capture(r *run, ptrs []uintptr) (*graph, error) {
	if err := be.drv.BeginCapture(be.stream); err != nil {
		return nil, err
	}
	for _, l := range r.launches {
		if err := be.launchOne(l, ptrs); err != nil {
			if g, endErr := be.drv.EndCapture(be.stream); endErr == nil && g != 0 {
				be.drv.DestroyGraph(g)
			}
			return nil, err
		}
	}
	g, err := be.drv.EndCapture(be.stream)
	if err != nil {
		return nil, err
	}
	exec, err := be.drv.Instantiate(g)
	if err != nil {
		be.drv.DestroyGraph(g)
		return nil, err
	}
	return &graph{sig: bytes.Clone(r.sig), graph: g, exec: exec}, nil
}

// evict destroys a graph the cache lets go of, once the stream is done with it.
func (be *Backend) evict(g *graph) error {
	if err := be.drv.SyncStream(be.stream); err != nil {
		return err
	}
	be.drv.DestroyGraphExec(g.exec)
	be.drv.DestroyGraph(g.graph)
	return nil
}

// graph is a captured run: its signature, the graph and its executable.
type graph struct {
	sig         []byte
	graph, exec uintptr
}

// What a key has been seen as.
const (
	seenOnce      = 1
	captureFailed = 2
)

// graphCache holds the graphs of runs by the hash of their signature, at most size of them,
// the least recently used going first.
type graphCache struct {
	byKey *lru.Map[uint64, *graph]
	seen  map[uint64]uint8
}

func newGraphCache(size int) graphCache {
	return graphCache{byKey: lru.New[uint64, *graph](size), seen: map[uint64]uint8{}}
}

// get returns the graph of a run whose signature is sig, comparing every byte.
func (c *graphCache) get(key uint64, sig []byte) *graph {
	if g, ok := c.byKey.Peek(key); !ok || !bytes.Equal(g.sig, sig) {
		return nil
	}
	g, _ := c.byKey.Get(key)
	return g
}

func (c *graphCache) see(key uint64, how uint8) {
	if len(c.seen) >= maxSeen {
		clear(c.seen)
	}
	c.seen[key] = how
}

// add keeps g under key, evicting the graph of the same key and the least recently used one
// beyond the size; where an eviction fails, g is not kept and the first error is returned.
func (c *graphCache) add(key uint64, g *graph, evict func(*graph) error) error {
	var first error
	for _, old := range c.byKey.Put(key, g, 1) {
		if err := evict(old); err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.byKey.Remove(key)
	}
	return first
}

// clear destroys every graph; the stream must be idle.
func (c *graphCache) clear(drv Driver) {
	for _, g := range c.byKey.All() {
		drv.DestroyGraphExec(g.exec)
		drv.DestroyGraph(g.graph)
	}
	c.byKey.Clear()
	clear(c.seen)
}
