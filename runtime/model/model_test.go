package model

import "testing"

// TestPickModelTypeFirst: a family named by model_type is picked over an earlier family that
// only shares the architecture (a copy of a family under a new model_type, a fine-tune's class).
func TestPickModelTypeFirst(t *testing.T) {
	mu.Lock()
	saved := families
	families = []*Family{
		{Name: "a_copy", ModelTypes: []string{"a_copy"}, Architectures: []string{"AForCausalLM"}},
		{Name: "b", ModelTypes: []string{"b"}, Architectures: []string{"AForCausalLM"}},
	}
	mu.Unlock()
	defer func() { mu.Lock(); families = saved; mu.Unlock() }()
	for _, c := range []struct{ mt, want string }{{"b", "b"}, {"a_copy", "a_copy"}, {"other", "a_copy"}} {
		f, err := Pick(c.mt, []string{"AForCausalLM"})
		if err != nil || f.Name != c.want {
			t.Errorf("Pick(%q) = %v, %v; want %s", c.mt, f, err, c.want)
		}
	}
	if _, err := Pick("c", []string{"CModel"}); err == nil {
		t.Errorf("Pick of an unknown model_type and architecture gave no error")
	}
}
