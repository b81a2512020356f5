package model

import (
	"slices"
	"strings"
	"testing"

	"tfc/compiler/lower"
	"tfc/compiler/specialize"
	"tfc/runtime/checkpoint"
)

// testProgram binds four values the ways a family's program may: at one of two paths, with an
// int default into a float, as an int list of fixed length, as a string default; D/2 derived;
// and requires D even.
func testProgram() *specialize.Program {
	return &specialize.Program{
		Family: "fam",
		Params: []*lower.Param{
			{Name: "D", Type: "int", Paths: []string{"text_config.hidden_size", "hidden_size"}, Kernels: lower.Int(64)},
			{Name: "theta", Type: "float", Paths: []string{"rope_theta"}, Default: lower.Int(10000), Kernels: lower.Float(1e6)},
			{Name: "sect", Type: "ints", Len: 3, Paths: []string{"mrope_section"}, Kernels: lower.List(lower.Int(2), lower.Int(3), lower.Int(3))},
			{Name: "act", Type: "string", Paths: []string{"hidden_act"}, Default: lower.Str("silu")},
			{Name: "HD", Type: "int", Derived: lower.Bin("/", lower.Ref("D"), lower.Int(2))},
		},
		Requires: []*lower.Require{{Cond: lower.Bin("==", lower.Bin("%", lower.Ref("D"), lower.Int(2)), lower.Int(0)), Src: "D%2 == 0", Pos: lower.Pos{File: "graphs/fam.graph", Line: 9}}},
	}
}

func parse(t *testing.T, text string) *checkpoint.Config {
	t.Helper()
	cfg, err := checkpoint.ParseConfig("config.json", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestBindProgram: values are read at their first present path, defaults fill silent ones (an
// int default into a float), derived values follow, refusals name the value or the requirement
// with what it read, and Unpinned compares the values with what the kernels have.
func TestBindProgram(t *testing.T) {
	env, table, err := BindProgram(testProgram(), parse(t, `{"hidden_size": 64, "mrope_section": [2, 3, 3]}`))
	if err != nil {
		t.Fatal(err)
	}
	if lower.GoValue(env["D"]) != 64 || lower.GoValue(env["theta"]) != 10000.0 || !slices.Equal(lower.GoValue(env["sect"]).([]int), []int{2, 3, 3}) ||
		lower.GoValue(env["act"]) != "silu" || lower.GoValue(env["HD"]) != 32 || lower.GoValue(env["sect[1]"]) != 3 {
		t.Fatalf("bound %v", env)
	}
	if got := Unpinned(table, "fam", 16, 16); len(got) != 1 || got[0] != "theta = 10000 (rope_theta), the kernels have 1e+06" {
		t.Fatalf("unpinned %q", got)
	}
	if got := Unpinned(table, "fam", 32, 0); len(got) != 1 || !strings.HasPrefix(got[0], "no HIP kernels") {
		t.Fatalf("without kernels: %q", got)
	}
	if vs := Values(table); len(vs) != 5 || vs[1].Value != 10000.0 || vs[0].Path != "text_config.hidden_size|hidden_size" || vs[4].Path != "= D / 2" {
		t.Fatalf("values %+v", vs)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"mrope_section": [2, 3, 3]}`, "config.json has no text_config.hidden_size or hidden_size; fam needs it as D"},
		{`{"hidden_size": 64, "mrope_section": [2, 3]}`, "sect (mrope_section) has 2 values; fam needs 3"},
		{`{"hidden_size": "big", "mrope_section": [2, 3, 3]}`, "config.json: D (text_config.hidden_size | hidden_size): "},
		{`{"hidden_size": 63, "mrope_section": [2, 3, 3]}`, "fam requires D%2 == 0 (graphs/fam.graph:9); this checkpoint has D = 63"},
	} {
		if _, _, err := BindProgram(testProgram(), parse(t, bad.json)); err == nil || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %s", bad.json, err, bad.want)
		}
	}
}
