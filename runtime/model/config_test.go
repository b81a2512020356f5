package model

import (
	"slices"
	"strings"
	"testing"

	"tfc/runtime/checkpoint"
)

type testConfig struct {
	D     int
	Theta float64
	Sect  []int
	Act   string
}

func (c *testConfig) table() []ConfigValue {
	return []ConfigValue{
		{Name: "D", Path: "text_config.hidden_size|hidden_size", Into: &c.D, Kernels: 64},
		{Name: "theta", Path: "rope_theta", Into: &c.Theta, Default: 10000, Kernels: float64(1e6)},
		{Name: "sect", Path: "mrope_section", Into: &c.Sect, Len: 3, Kernels: []int{2, 3, 3}},
		{Name: "act", Path: "hidden_act", Into: &c.Act, Default: "silu"},
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

// TestReadConfigFromTheTable: values are read at their first present path, defaults fill silent
// ones (an int default into a float field), refusals name the value, and Unpinned compares the
// fields with what the kernels have.
func TestReadConfigFromTheTable(t *testing.T) {
	c := &testConfig{}
	if err := ReadConfig(parse(t, `{"hidden_size": 64, "mrope_section": [2, 3, 3]}`), "fam", c.table()); err != nil {
		t.Fatal(err)
	}
	if c.D != 64 || c.Theta != 10000 || !slices.Equal(c.Sect, []int{2, 3, 3}) || c.Act != "silu" {
		t.Fatalf("read %+v", c)
	}
	if got := Unpinned(c.table(), "fam", 16, 16); len(got) != 1 || got[0] != "theta = 10000 (rope_theta), the kernels have 1e+06" {
		t.Fatalf("unpinned %q", got)
	}
	if got := Unpinned(c.table(), "fam", 32, 0); len(got) != 1 || !strings.HasPrefix(got[0], "no HIP kernels") {
		t.Fatalf("without kernels: %q", got)
	}
	if vs := Values(c.table()); len(vs) != 4 || vs[1].Value != 10000.0 || vs[0].Path != "text_config.hidden_size|hidden_size" {
		t.Fatalf("values %+v", vs)
	}
	for _, bad := range []struct{ json, want string }{
		{`{"mrope_section": [2, 3, 3]}`, "config.json has no text_config.hidden_size or hidden_size; fam needs it as D"},
		{`{"hidden_size": 64, "mrope_section": [2, 3]}`, "sect (mrope_section) has 2 values; fam needs 3"},
		{`{"hidden_size": "big", "mrope_section": [2, 3, 3]}`, "config.json: D (text_config.hidden_size | hidden_size): "},
	} {
		if err := ReadConfig(parse(t, bad.json), "fam", (&testConfig{}).table()); err == nil || !strings.HasPrefix(err.Error(), bad.want) {
			t.Errorf("%s: %v, want %s", bad.json, err, bad.want)
		}
	}
}
