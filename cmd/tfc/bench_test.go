package main

import (
	"os"
	"path/filepath"
	"testing"

	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/positions"
)

// openTiny loads the tiny Qwen2-VL on the CPU backend.
func openTiny(b *testing.B) *engine.Engine {
	e, err := engine.Open(tinyQwen2VL, cpu.New(), model.Limits{Context: 1024, Parallel: 1, Rows: 512, PageSize: 16, Patches: 4096})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.Close)
	return e
}

// BenchmarkTinyDecodeRound times one decode round (one row at cache position 256) of the tiny model.
func BenchmarkTinyDecodeRound(b *testing.B) {
	e := openTiny(b)
	const at = 256
	pages := make([]int32, 1024/16)
	for i := range pages {
		pages[i] = int32(i)
	}
	// fill the cache to position at, so the round attends over a real context
	fill := &model.Round{PageTable: pages, LogitRows: []int32{at - 1}}
	for i := 0; i < at; i++ {
		fill.Tokens = append(fill.Tokens, int32(1000+i))
		fill.Positions = append(fill.Positions, int32(i), int32(i), int32(i))
		fill.Seq = append(fill.Seq, 0)
		fill.Pos = append(fill.Pos, int32(i))
	}
	if _, err := e.Model.Forward(fill); err != nil {
		b.Fatal(err)
	}
	round := &model.Round{Tokens: []int32{42}, Positions: []int32{at, at, at}, Seq: []int32{0}, Pos: []int32{at}, PageTable: pages, LogitRows: []int32{0}}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Model.Forward(round); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

// BenchmarkTinyVisionImage times the vision tower on one 112x70 image (the oracle's b.png).
func BenchmarkTinyVisionImage(b *testing.B) {
	e := openTiny(b)
	fe, err := engine.LoadFrontend(tinyQwen2VL)
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(tinyQwen2VL, "oracle", "images", "b.png"))
	if err != nil {
		b.Fatal(err)
	}
	imgs, err := fe.Images([][]byte{data})
	if err != nil {
		b.Fatal(err)
	}
	grid := [][3]int{imgs[0].GridTHW}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := e.Model.Vision(imgs[0].Pixels, grid); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(positions.Vision2D([]positions.Grid{positions.Grid(grid[0])}, 1))/2), "patches")
}
