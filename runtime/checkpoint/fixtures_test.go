package checkpoint_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	ct "tfc/runtime/checkpoint/checkpointtest"
)

var update = flag.Bool("update", false, "rewrite the broken checkpoints under testdata/checkpoint")

// brokenFixtures are the committed broken checkpoints, how each is made from a good sharded
// one, and what its refusal must name.
var brokenFixtures = []struct {
	name   string
	break_ func(t *testing.T, dir string)
	want   []string
}{
	{"truncated-shard", func(t *testing.T, dir string) {
		ct.Truncate(t, dir, "model-00002-of-00002.safetensors", 5)
	}, []string{"model-00002-of-00002.safetensors: tensor model.layers.0.mlp.up_proj.weight", "(and 1 more after it)", "truncated"}},
	{"missing-shard", func(t *testing.T, dir string) {
		if err := os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors")); err != nil {
			t.Fatal(err)
		}
	}, []string{"model-00002-of-00002.safetensors: model.safetensors.index.json places 2 tensors", "download it"}},
	{"renamed-tensor-in-shard", func(t *testing.T, dir string) {
		ct.RenameInFile(t, dir, "model-00001-of-00002.safetensors", "model.embed_tokens.weight", "model.embed.weight")
	}, []string{"model-00001-of-00002.safetensors: tensor model.embed.weight: not listed in model.safetensors.index.json",
		"tensor model.embed_tokens.weight: model.safetensors.index.json places it in this file but the file does not hold it"}},
}

const fixtureRoot = "../../testdata/checkpoint"

// TestBrokenFixtures checks that each committed broken checkpoint is refused by name and is
// what its recipe makes; go test -run BrokenFixtures -update rewrites them.
func TestBrokenFixtures(t *testing.T) {
	for _, fx := range brokenFixtures {
		t.Run(fx.name, func(t *testing.T) {
			fresh := shardedDir(t)
			fx.break_(t, fresh)
			dir := filepath.Join(fixtureRoot, fx.name)
			if *update {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				ct.CopyDir(t, dir, fresh)
			}
			if diff := diffDirs(t, dir, fresh); diff != "" {
				t.Errorf("%s is stale (%s); run go test ./runtime/checkpoint -run BrokenFixtures -update", dir, diff)
			}
			wantOpenError(t, dir, fx.want...)
		})
	}
}

func diffDirs(t *testing.T, a, b string) string {
	names := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	an, bn := names(a), names(b)
	if strings.Join(an, ",") != strings.Join(bn, ",") {
		return "files " + strings.Join(an, ",") + " vs " + strings.Join(bn, ",")
	}
	for _, n := range an {
		x, _ := os.ReadFile(filepath.Join(a, n))
		y, _ := os.ReadFile(filepath.Join(b, n))
		if string(x) != string(y) {
			return n + " differs"
		}
	}
	return ""
}
