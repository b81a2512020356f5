package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"tfc/compiler/emit/hip"
	"tfc/contracts"
	"tfc/contracts/sweep"
	"tfc/gen/registry"
	"tfc/runtime/checkpoint"
	"tfc/runtime/device"
	"tfc/runtime/device/cpu"
	"tfc/runtime/engine"
	"tfc/runtime/model"
	"tfc/runtime/sample"
)

// randomNear draws a config near one of a family's sweep configs: one to three changes (every
// value equal to a chosen width scaled by 2, 1/2, 3/2 or 2/3; a width moved by one; one unit
// moved between two entries of a list; a flag flipped wherever its key stands; a theta swapped),
// kept only when the family's require lines accept it and no width passes 640. The sweep holds
// the family's edges; this walks between them.
func randomNear(t *testing.T, bases []sweep.Config, rng *rand.Rand, seed uint64) sweep.Config {
	for range 500 {
		base := bases[rng.IntN(len(bases))]
		set := cloneJSON(base.Set).(map[string]any)
		for range 1 + rng.IntN(3) {
			mutate(set, rng)
		}
		if reflect.DeepEqual(set, base.Set) || maxWhole(set) > 640 {
			continue
		}
		c := sweep.Config{Name: "random", Family: base.Family, Fixture: base.Fixture, Seed: seed, Set: set, DType: base.DType}
		cfgJSON, err := c.ConfigJSON(testdata)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := bindConfig(t, cfgJSON); err == nil {
			return c
		}
	}
	t.Fatalf("no config near %s's sweep configs passed its require lines in 500 draws", bases[0].Family)
	return sweep.Config{}
}

// leaf is a value of a config set, with its path and a setter.
type leaf struct {
	path string
	get  func() any
	set  func(any)
}

// leaves lists the values under v in path order.
func leaves(v any, path string, out *[]leaf) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			*out = append(*out, leaf{path + "." + k, func() any { return x[k] }, func(y any) { x[k] = y }})
			leaves(x[k], path+"."+k, out)
		}
	case []any:
		for i := range x {
			p := fmt.Sprintf("%s[%d]", path, i)
			*out = append(*out, leaf{p, func() any { return x[i] }, func(y any) { x[i] = y }})
			leaves(x[i], p, out)
		}
	}
}

// whole is v as a positive whole number, when it is one.
func whole(v any) (int, bool) {
	f, ok := v.(float64)
	return int(f), ok && f == math.Trunc(f) && f >= 1
}

// mutate makes one random change to set (see randomNear).
func mutate(set map[string]any, rng *rand.Rand) {
	var ls, ints, lists, flags, thetas []leaf
	leaves(set, "", &ls)
	for _, l := range ls {
		switch v := l.get().(type) {
		case float64:
			if strings.Contains(l.path, "theta") {
				thetas = append(thetas, l)
			} else if _, ok := whole(v); ok {
				ints = append(ints, l)
			}
		case bool:
			flags = append(flags, l)
		case []any:
			if _, ok := whole(v[0]); ok && len(v) >= 2 {
				lists = append(lists, l)
			}
		}
	}
	switch op := rng.IntN(5); {
	case op == 0 && len(ints) > 0: // scale every value equal to one width
		w, _ := whole(ints[rng.IntN(len(ints))].get())
		r := [][2]int{{2, 1}, {1, 2}, {3, 2}, {2, 3}}[rng.IntN(4)]
		if w*r[0]%r[1] != 0 {
			return
		}
		for _, l := range ints {
			if v, _ := whole(l.get()); v == w {
				l.set(float64(w * r[0] / r[1]))
			}
		}
	case op == 1 && len(ints) > 0: // move one width by one
		l := ints[rng.IntN(len(ints))]
		v, _ := whole(l.get())
		if rng.IntN(2) == 0 || v == 1 {
			l.set(float64(v + 1))
		} else {
			l.set(float64(v - 1))
		}
	case op == 2 && len(lists) > 0: // move one unit between two entries of a list
		xs := lists[rng.IntN(len(lists))].get().([]any)
		i, j := rng.IntN(len(xs)), rng.IntN(len(xs))
		a, _ := whole(xs[i])
		if b, ok := whole(xs[j]); ok && i != j && a > 1 {
			xs[i], xs[j] = float64(a-1), float64(b+1)
		}
	case op == 3 && len(flags) > 0: // flip a flag wherever its key stands
		l := flags[rng.IntN(len(flags))]
		key, v := l.path[strings.LastIndex(l.path, "."):], !l.get().(bool)
		for _, m := range flags {
			if strings.HasSuffix(m.path, key) {
				m.set(v)
			}
		}
	case op == 4 && len(thetas) > 0: // swap a theta
		thetas[rng.IntN(len(thetas))].set([]float64{5000, 10000, 1000000}[rng.IntN(3)])
	}
}

// cloneJSON copies a decoded JSON value.
func cloneJSON(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, y := range x {
			m[k] = cloneJSON(y)
		}
		return m
	case []any:
		s := make([]any, len(x))
		for i, y := range x {
			s[i] = cloneJSON(y)
		}
		return s
	}
	return v
}

// maxWhole is the largest whole number under v.
func maxWhole(v any) int {
	n := 0
	switch x := v.(type) {
	case map[string]any:
		for k, y := range x {
			if !strings.Contains(k, "theta") { // a rotary base is no width
				n = max(n, maxWhole(y))
			}
		}
	case []any:
		for _, y := range x {
			n = max(n, maxWhole(y))
		}
	default:
		if w, ok := whole(x); ok {
			n = w
		}
	}
	return n
}

// TestRandomConfigs: for random configs that satisfy a family's require lines (three near its
// sweep configs, for every registered family), binding and
// specialising succeed, every kernel specialised for the config passes gates 1-4 against its
// float64 reference on the CPU with every planted control red, and the CPU's whole forward on an
// image prompt (random weights) gives the ids and logits of the graph's float64 reference.
func TestRandomConfigs(t *testing.T) {
	seed := uint64(20261203)
	if testing.Short() {
		t.Skip("random configs take about a minute")
	}
	f, err := sweep.Load(sweepFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range registry.Families {
		var bases []sweep.Config
		for _, c := range f.Configs {
			if c.Family == fam.Name {
				bases = append(bases, c)
			}
		}
		if len(bases) == 0 {
			t.Errorf("family %s has no sweep configs to draw random ones near", fam.Name)
			continue
		}
		rng := rand.New(rand.NewPCG(seed, uint64(len(fam.Name))))
		for i := 0; i < 3; i++ {
			c := randomNear(t, bases, rng, seed+uint64(i))
			set := c.Set
			t.Run(fmt.Sprintf("%s-%d", fam.Name, i), func(t *testing.T) {
				cfgJSON, err := c.ConfigJSON(testdata)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("config %s", summary(set))
				fam, cfg, err := bindConfig(t, cfgJSON)
				if err != nil {
					t.Fatalf("a config the require lines allow is refused: %v", err)
				}
				f, err := contracts.ForCheckpoint(fam.Name, "../..", cfg, 16)
				if err != nil {
					t.Fatalf("specialising: %v", err)
				}
				if _, err := contracts.Sources(f); err != nil {
					t.Fatalf("rendering: %v", err)
				}
				target, _, done, err := contractTarget("cpu", device.F32Precision, f)
				if err != nil {
					t.Fatal(err)
				}
				defer done()
				if r := contracts.Run(target, f, int64(seed)+int64(i), io.Discard); !r.OK() {
					t.Fatalf("contract: %s", r.Summary())
				}
				control := ""
				if i == 0 {
					for _, k := range f.Kernels {
						if strings.HasSuffix(k.Name, "_decode_attention") {
							control = k.Name
						}
					}
				}
				runRandom(t, c, control)
			})
		}
	}
}

// runRandom writes a checkpoint of c with seeded weights and generates six tokens for an image
// prompt on the CPU backend and on the float64 reference of the graph (contracts.ReferenceBackend
// over the CPU's memory): the ids must be equal up to a tie and every step's logits close. When
// control names a kernel, the CPU with that kernel's scale dropped must fail the same comparison.
func runRandom(t *testing.T, c sweep.Config, control string) {
	dir := t.TempDir()
	f := &sweep.File{Images: []sweep.Picture{{Name: "p.png", W: 71, H: 45, Model: "rgb", Seed: 9}},
		Cases: map[string]sweep.Case{"one": {Images: []string{"p.png"}}}}
	c.Cases = []string{"one"}
	if _, err := f.Write(c, testdata, dir); err != nil {
		t.Fatal(err)
	}
	refIDs, refSteps := generateOn(t, dir, contracts.ReferenceBackend{Backend: cpu.New()})
	cpuIDs, cpuSteps := generateOn(t, dir, cpu.New())
	worst, err := againstReference(cpuIDs, cpuSteps, refIDs, refSteps)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ids equal to the float64 reference's; logits within %.3g of the largest", len(refIDs), worst)
	if control == "" {
		return
	}
	bad, err := contracts.HostPlant(cpu.New(), contracts.Control{Kernel: control, Mutation: hip.DroppedScale.String()})
	if err != nil {
		t.Fatal(err)
	}
	ids, steps := generateOn(t, dir, bad)
	if _, err := againstReference(ids, steps, refIDs, refSteps); err == nil {
		t.Errorf("control: the CPU with %s's scale dropped matches the float64 reference", control)
	} else {
		t.Logf("control red: %v", err)
	}
}

// againstReference compares greedy ids and each step's logits with the reference's: ids equal up
// to a step where the reference's top-2 margin is a tie at the bound, logits within randomBound
// of the step's largest; it returns the largest relative difference.
func againstReference(ids []int32, steps [][]float32, refIDs []int32, refSteps [][]float32) (float64, error) {
	worst := 0.0
	for i := range refIDs {
		if i >= len(steps) {
			return worst, fmt.Errorf("%d steps, the reference %d", len(steps), len(refSteps))
		}
		top, second := top2(refSteps[i])
		scale := math.Max(1, math.Abs(float64(refSteps[i][top])))
		for j := range refSteps[i] {
			worst = math.Max(worst, math.Abs(float64(steps[i][j]-refSteps[i][j]))/scale)
		}
		if worst > randomBound {
			return worst, fmt.Errorf("step %d: logits differ from the float64 reference by %.3g of the largest (bound %g)", i, worst, randomBound)
		}
		if i >= len(ids) || ids[i] != refIDs[i] {
			if m := float64(refSteps[i][top] - refSteps[i][second]); m < 2*randomBound*scale {
				return worst, nil // a tie: the runs may part here
			}
			return worst, fmt.Errorf("greedy ids %v, float64 reference %v", ids, refIDs)
		}
	}
	return worst, nil
}

// randomBound bounds the CPU's logits against the float64 reference, relative to the largest.
const randomBound = 1e-5

// generateOn runs the image prompt on backend b and returns the greedy ids and each step's logits.
func generateOn(t *testing.T, dir string, b device.Backend) ([]int32, [][]float32) {
	fe, e := openEngine(t, dir, b, model.Limits{Context: 256, Parallel: 1, Rows: 32, PageSize: 16, Patches: 512})
	msgs := []byte(`[{"role":"user","content":[{"type":"image","image":"p.png"},{"type":"text","text":"Read this."}]}]`)
	p := chatPrompt(t, fe, e, filepath.Join(dir, "images"), []string{"p.png"}, msgs)
	var steps [][]float32
	res, err := e.Generate(p, engine.Options{MaxTokens: 6, Sample: sample.Params{},
		Step: func(_ int, logits []float32) { steps = append(steps, append([]float32(nil), logits...)) }})
	if err != nil {
		t.Fatal(err)
	}
	return res.OutputIDs, steps
}

// top2 returns the indices of the largest and second largest values.
func top2(v []float32) (int, int) {
	a, b := 0, 1
	if v[b] > v[a] {
		a, b = b, a
	}
	for i := 2; i < len(v); i++ {
		switch {
		case v[i] > v[a]:
			a, b = i, a
		case v[i] > v[b]:
			b = i
		}
	}
	return a, b
}

// bindConfig picks the family of a config.json and binds it; err is the refusal.
func bindConfig(t *testing.T, cfgJSON []byte) (*model.Family, *checkpoint.Config, error) {
	t.Helper()
	cfg, err := checkpoint.ParseConfig("config.json", cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	fam, _, err := engine.Bind(cfg)
	return fam, cfg, err
}

// summary prints a config's values on one line.
func summary(set map[string]any) string {
	b, _ := json.Marshal(set)
	return strings.ReplaceAll(string(b), `"`, "")
}

// TestRopeScalingRefused: a rotary scaling the graphs do not compute is refused by name, with the
// require's file:line, in every registered family; the plain rotary is accepted when its config
// names it, and so are the legacy M-RoPE configs (sections under rope_scaling, its type "mrope",
// or "default" under both type and rope_type) where the family's config has M-RoPE sections.
func TestRopeScalingRefused(t *testing.T) {
	for _, fam := range registry.Families {
		fixture := strings.TrimPrefix(fam.Fixture, "testdata/")
		base, err := sweep.Config{Fixture: fixture}.ConfigJSON(testdata)
		if err != nil {
			t.Fatal(err)
		}
		var cfg map[string]any
		if err := json.Unmarshal(base, &cfg); err != nil {
			t.Fatal(err)
		}
		// the text rotary's settings: under text_config where the config has one
		at := func(m map[string]any) map[string]any { return m }
		if tc, ok := cfg["text_config"].(map[string]any); ok {
			at = func(m map[string]any) map[string]any { return map[string]any{"text_config": m} }
			cfg = tc
		}
		params, _ := cfg["rope_parameters"].(map[string]any)
		scaled := map[string]any{"rope_type": "linear", "factor": 2.0} // the rotary settings moved under rope_scaling
		for k, v := range params {
			if k != "rope_type" {
				scaled[k] = v
			}
		}
		type ropeCase struct {
			set     map[string]any
			refused string // "" when accepted
		}
		cases := []ropeCase{
			{at(map[string]any{"rope_parameters": map[string]any{"rope_type": "yarn", "factor": 2.0}}), "yarn"},
			{at(map[string]any{"rope_parameters": nil, "rope_scaling": scaled}), "linear"},
			{at(map[string]any{"rope_parameters": map[string]any{"rope_type": "default"}}), ""},
		}
		if sect, ok := params["mrope_section"]; ok {
			legacy := func(scaling map[string]any) map[string]any {
				scaling["mrope_section"] = sect
				return at(map[string]any{"rope_parameters": nil, "rope_scaling": scaling})
			}
			cases = append(cases, []ropeCase{
				{legacy(map[string]any{"type": "mrope"}), ""},                                           // as the Hub publishes Qwen2-VL
				{legacy(map[string]any{"type": "default", "rope_type": "default"}), ""},                 // as transformers 4.45-4.57 save it
				{legacy(map[string]any{"type": "dynamic"}), "dynamic"},                                  // a scaling, by its old key
				{legacy(map[string]any{"type": "default", "rope_type": "yarn", "factor": 2.0}), "yarn"}, // and by its new one
			}...)
		}
		for _, tc := range cases {
			cfgJSON, err := sweep.Config{Fixture: fixture, Set: tc.set}.ConfigJSON(testdata)
			if err != nil {
				t.Fatal(err)
			}
			_, _, err = bindConfig(t, cfgJSON)
			switch {
			case tc.refused == "" && err != nil:
				t.Errorf("%s %s: refused: %v", fam.Name, summary(tc.set), err)
			case tc.refused != "" && (err == nil || !strings.Contains(err.Error(), "("+fam.Graph+":") || !strings.Contains(err.Error(), tc.refused)):
				t.Errorf("%s %s: got %v, want a refusal naming %s and %q", fam.Name, summary(tc.set), err, fam.Graph, tc.refused)
			}
		}
	}
}

// TestReferenceBackendGate: the graph's float64 reference, run whole, gives the publishers' ids
// and logits on the tiny fixtures (the reference TestRandomConfigs holds the CPU to).
func TestReferenceBackendGate(t *testing.T) {
	gateFixtures(t, func() (device.Backend, error) { return contracts.ReferenceBackend{Backend: cpu.New()}, nil })
}
