package gpu

import "unsafe"

// Driver is what Backend needs of a vendor runtime (the CUDA driver API, HIP). Handles are
// opaque; every call runs on the backend's Thread, where the driver's context is current, and
// its error names the driver call and the code it returned.
type Driver interface {
	// Alloc returns bytes of device memory; Free releases it.
	Alloc(bytes uint64) (uint64, error)
	Free(ptr uint64) error
	// MemsetAsync zeroes bytes at ptr in stream order.
	MemsetAsync(ptr, bytes uint64, stream uintptr) error
	// CopyToDevice and CopyToHost queue a copy on stream. Backend keeps host alive and unchanged
	// until the stream has been synchronised.
	CopyToDevice(dst uint64, host []byte, stream uintptr) error
	CopyToHost(host []byte, src uint64, stream uintptr) error

	NewStream() (uintptr, error) // a stream that does not wait for the legacy default stream
	SyncStream(stream uintptr) error
	DestroyStream(stream uintptr) error

	LoadModule(image []byte) (uintptr, error)
	UnloadModule(module uintptr) error
	Function(module uintptr, symbol string) (uintptr, error)
	// Launch queues fn on stream with a grid of gridX×gridY blocks of block threads and lds bytes
	// of dynamic LDS; params is an array of pointers to the argument values, read before Launch
	// returns.
	Launch(fn uintptr, gridX, gridY, block, lds uint32, params unsafe.Pointer, stream uintptr) error

	NewEvent() (uintptr, error)
	RecordEvent(event, stream uintptr) error
	// ElapsedMs is the time between two completed events in milliseconds.
	ElapsedMs(start, stop uintptr) (float32, error)
	DestroyEvent(event uintptr) error

	// BeginCapture starts capturing stream's work into a graph (thread-local mode); EndCapture
	// ends it and returns the graph.
	BeginCapture(stream uintptr) error
	EndCapture(stream uintptr) (uintptr, error)
	Instantiate(graph uintptr) (uintptr, error)
	LaunchGraph(exec, stream uintptr) error
	DestroyGraphExec(exec uintptr) error
	DestroyGraph(graph uintptr) error
}
