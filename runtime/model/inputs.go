package model

import (
	"tfc/runtime/device"
	"tfc/runtime/positions"
)

// Absent is a plan offset for an input role the graph does not read.
const Absent = -1

// RoundPlan is where a decoder graph's inputs lie in its arenas: each role's buffer offset
// (Absent where the graph reads none) and the widths the graph gives them.
type RoundPlan struct {
	Tokens, Positions, ImageRows, ImageAt, LogitRows, Seq, Pos, PageTable int
	Axes, Hidden                                                          int // positions' axes, image rows' width
}

// RoundIn is a decoder graph's inputs for one round on the device, as Launcher.Round wrote them.
type RoundIn struct {
	R, I, S                                          int // the round's rows, image rows and logit rows
	Tokens, Positions, ImageRows, ImageAt, LogitRows device.Tensor
	Rows                                             device.Rows // each row's sequence, cache position and page table
}

// Round writes round r's data to the inputs plan places and checks its sizes against the Rows
// limit. A round without rows or with data of the wrong length is the call's error (Finish
// returns it) and gives inputs of no rows.
func (l *Launcher) Round(r *Round, p RoundPlan) RoundIn {
	if r == nil || len(r.Tokens) == 0 {
		l.Check(false, "the round has no rows")
		return RoundIn{}
	}
	sh := roundShape(r, p)
	in := RoundIn{R: sh.R, I: sh.I, S: sh.S}
	l.Limit("R", in.R, "Rows", l.Lim.Rows)
	l.Limit("I", in.I, "Rows", l.Lim.Rows)
	l.Limit("S", in.S, "Rows", l.Lim.Rows)
	pages := (l.Lim.Context + l.Lim.PageSize - 1) / l.Lim.PageSize
	in.Tokens = l.input(p.Tokens, l.I32, 1, in.R, r.Tokens, device.I32, "tokens", "[1, R]")
	in.Positions = l.input(p.Positions, l.I32, in.R, p.Axes, r.Positions, device.I32, "positions", "[R, axes]")
	in.ImageRows = l.input(p.ImageRows, l.F32, in.I, p.Hidden, r.ImageRows, device.F32, "image_rows", "[I, hidden]")
	in.ImageAt = l.input(p.ImageAt, l.I32, 1, in.I, r.ImageAt, device.I32, "image_at", "[1, I]")
	in.LogitRows = l.input(p.LogitRows, l.I32, 1, in.S, r.LogitRows, device.I32, "logit_rows", "[1, S]")
	in.Rows = device.Rows{
		RowSeq:    l.input(p.Seq, l.I32, 1, in.R, r.Seq, device.I32, "row_seq", "[1, R]"),
		RowPos:    l.input(p.Pos, l.I32, 1, in.R, r.Pos, device.I32, "row_pos", "[1, R]"),
		PageTable: l.input(p.PageTable, l.I32, l.Lim.Parallel, pages, r.PageTable, device.I32, "page_table", "[Parallel, pages]"),
		PageSize:  l.Lim.PageSize,
	}
	l.shape, l.plan = sh, p
	l.recording = l.tapes != nil && l.Trace == nil && l.err == nil
	return in
}

// roundShape is round r's rows, image rows (of the plan's width) and logit rows.
func roundShape(r *Round, p RoundPlan) shape {
	s := shape{R: len(r.Tokens), S: len(r.LogitRows)}
	if p.ImageRows != Absent {
		s.I = len(r.ImageRows) / p.Hidden
	}
	return s
}

// ImagePlan is where a vision graph's inputs lie in its arenas: each role's buffer offset (Absent
// where the graph reads none), the pixel rows' width, and the image rule's sizes: merge (the
// merged window's side), order (the side of the windows the patches come grouped by: merge, or 1
// for raster order) and window (the attention window's side in merged units, where the graph
// reads the window layout).
type ImagePlan struct {
	Pixels, Pos, Spans, MergeOrder                     int
	WindowOrder, WindowInverse, WindowPos, WindowSpans int
	Width, Merge, Order, Window                        int
}

// ImageIn is a vision graph's inputs for one call on the device, as Launcher.Images wrote them.
type ImageIn struct {
	N, Kept                                            int // the patches, and those merge_order keeps
	Pixels, Pos, Spans, MergeOrder                     device.Tensor
	WindowOrder, WindowInverse, WindowPos, WindowSpans device.Tensor
}

// Images writes pixels [N, Width] of images of (t, h, w) grids, each side a multiple of merge,
// and what the graph reads of their layout: each patch's 2-D position (positions.Vision2D), the
// cumulative patch offsets of their frames (positions.Spans), the patch rows of each merged unit
// for raster patches (positions.MergeOrder), and the window layout (positions.WindowLayout). A
// bad grid or too many patches is the call's error and gives inputs of no rows.
func (l *Launcher) Images(pixels []float32, grids [][3]int, p ImagePlan) ImageIn {
	if l.err != nil {
		return ImageIn{}
	}
	n, err := ImagePatches(l.Family, grids, p.Order, l.Lim.Patches)
	if err != nil {
		l.err = err
		return ImageIn{}
	}
	in := ImageIn{N: n}
	pos, spans := positions.Vision2D(grids, p.Order), positions.Spans(grids)
	in.Pixels = l.input(p.Pixels, l.F32, n, p.Width, pixels, device.F32, "pixels", "[N, width]")
	in.Pos = l.input(p.Pos, l.I32, n, 2, pos, device.I32, "positions", "[N, 2]")
	in.Spans = l.input(p.Spans, l.I32, 1, len(spans), spans, device.I32, "spans", "[1, frames + 1]")
	if p.MergeOrder != Absent {
		order := positions.MergeOrder(grids, p.Merge)
		in.Kept = len(order)
		in.MergeOrder = l.input(p.MergeOrder, l.I32, 1, in.Kept, order, device.I32, "merge_order", "[1, kept]")
	}
	if p.WindowOrder != Absent || p.WindowInverse != Absent || p.WindowPos != Absent || p.WindowSpans != Absent {
		win := positions.WindowLayout(grids, pos, p.Merge, p.Window)
		units := n / (p.Merge * p.Merge)
		in.WindowOrder = l.input(p.WindowOrder, l.I32, 1, n, win.Order, device.I32, "window_order", "[1, N]")
		in.WindowInverse = l.input(p.WindowInverse, l.I32, 1, units, win.Inverse, device.I32, "window_inverse", "[1, N / merge²]")
		in.WindowPos = l.input(p.WindowPos, l.I32, n, 2, win.Pos, device.I32, "window_pos", "[N, 2]")
		in.WindowSpans = l.input(p.WindowSpans, l.I32, 1, len(win.Spans), win.Spans, device.I32, "window_spans", "[1, windows + 1]")
	}
	return in
}

// input is the input of role name at offset off in buf, rows × cols, with data written to it;
// an empty tensor when the graph reads no such input (off is Absent).
func (l *Launcher) input(off int, buf device.Buffer, rows, cols int, data any, dt device.DType, name, shape string) device.Tensor {
	if off == Absent {
		return device.Tensor{}
	}
	t := device.Tensor{Buf: buf, Off: off, Rows: rows, Cols: cols}
	l.Write(t, data, dt, name, shape)
	return t
}
