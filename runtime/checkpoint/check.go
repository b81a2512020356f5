package checkpoint

import (
	"fmt"
	"strings"
)

// ProblemKind says how a checkpoint's tensor disagrees with the family's manifest.
type ProblemKind uint8

const (
	Missing       ProblemKind = iota + 1 // the manifest names it, the checkpoint lacks it
	Unexpected                           // the checkpoint holds it, the manifest does not name it
	ShapeMismatch                        // present with another shape
	DTypeRefused                         // present with a dtype the manifest does not allow
)

func (k ProblemKind) String() string {
	switch k {
	case Missing:
		return "missing"
	case Unexpected:
		return "unexpected"
	case ShapeMismatch:
		return "shape mismatch"
	case DTypeRefused:
		return "dtype refused"
	}
	return fmt.Sprintf("ProblemKind(%d)", uint8(k))
}

// Problem is one disagreement between a checkpoint and a manifest.
type Problem struct {
	Kind   ProblemKind
	Tensor string
	File   string // the file that holds the tensor, or for a missing one the file it was expected in
	Want   TensorSpec
	Got    TensorSpec // the tensor as found (DTypes has its one dtype); empty for a missing tensor
	Hint   string     // for a missing tensor: an unexpected one that looks like it was renamed from it
}

func (p Problem) Error() string { return p.String() }

func (p Problem) String() string {
	var msg string
	switch p.Kind {
	case Missing:
		msg = fmt.Sprintf("missing; the family needs it with shape %s (%s)", shapeString(p.Want.Shape), dtypesString(p.Want.DTypes))
		if p.Hint != "" {
			msg += "; " + p.Hint
		}
	case Unexpected:
		msg = fmt.Sprintf("unexpected (shape %s, %s); the family does not use it, so the checkpoint is not the family's or its names differ", shapeString(p.Got.Shape), dtypesString(p.Got.DTypes))
	case ShapeMismatch:
		msg = fmt.Sprintf("shape %s, want %s; config.json and the weights disagree", shapeString(p.Got.Shape), shapeString(p.Want.Shape))
	case DTypeRefused:
		msg = fmt.Sprintf("dtype %s, want %s", dtypesString(p.Got.DTypes), dtypesString(p.Want.DTypes))
	default:
		msg = p.Kind.String()
	}
	return fmt.Sprintf("%s: tensor %s: %s", p.File, p.Tensor, msg)
}

// Problems is a list of problems as one error.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return fmt.Sprintf("%d tensor problems:\n  %s", len(ps), strings.Join(lines, "\n  "))
}

func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func dtypesString(ds []DType) string {
	if len(ds) == 0 {
		return "BF16, F16 or F32"
	}
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.String()
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " or " + parts[len(parts)-1]
}

// Check compares every tensor with the manifest and lists each problem: manifest tensors
// missing or of the wrong shape or dtype, in manifest order, then tensors the manifest does
// not name, in file order. It reads headers only.
func (c *Checkpoint) Check(manifest []TensorSpec) []Problem {
	var problems []Problem
	wanted := make(map[string]bool, len(manifest))
	var missing []int // indices into problems
	for _, spec := range manifest {
		if wanted[spec.Name] {
			continue
		}
		wanted[spec.Name] = true
		l, ok := c.tensors[spec.Name]
		if !ok {
			missing = append(missing, len(problems))
			problems = append(problems, Problem{Kind: Missing, Tensor: spec.Name, File: c.expectedFile(spec.Name), Want: spec})
			continue
		}
		got := TensorSpec{Name: spec.Name, Shape: l.entry.Shape, DTypes: []DType{l.entry.DType}}
		file := l.shard.header.File
		if !equalShape(l.entry.Shape, spec.Shape) {
			problems = append(problems, Problem{Kind: ShapeMismatch, Tensor: spec.Name, File: file, Want: spec, Got: got})
		}
		if !allowed(l.entry.DType, spec.DTypes) {
			problems = append(problems, Problem{Kind: DTypeRefused, Tensor: spec.Name, File: file, Want: spec, Got: got})
		}
	}
	var unexpected []Problem
	for _, name := range c.order {
		if wanted[name] {
			continue
		}
		l := c.tensors[name]
		unexpected = append(unexpected, Problem{Kind: Unexpected, Tensor: name, File: l.shard.header.File,
			Got: TensorSpec{Name: name, Shape: l.entry.Shape, DTypes: []DType{l.entry.DType}}})
	}
	for _, i := range missing {
		if u := renamedFrom(problems[i], unexpected); u != nil {
			problems[i].Hint = fmt.Sprintf("%s has the unexpected tensor %s of that shape: was it renamed?", u.File, u.Tensor)
		}
	}
	return append(problems, unexpected...)
}

// expectedFile is where a missing tensor would be: the only weight file, the file of the
// tensor whose name shares the longest prefix with it, or else the index.
func (c *Checkpoint) expectedFile(name string) string {
	if len(c.shards) == 1 {
		return c.shards[0].header.File
	}
	best, bestLen := indexFile, 0
	for _, other := range c.order {
		n := commonPrefix(name, other)
		if n > bestLen {
			best, bestLen = c.tensors[other].shard.header.File, n
		}
	}
	return best
}

// renamedFrom finds the unexpected tensor of the same shape whose name is closest to the missing one's.
func renamedFrom(m Problem, unexpected []Problem) *Problem {
	var best *Problem
	bestScore := 0
	for i := range unexpected {
		u := &unexpected[i]
		if !equalShape(u.Got.Shape, m.Want.Shape) {
			continue
		}
		score := commonPrefix(m.Tensor, u.Tensor) + commonSuffix(m.Tensor, u.Tensor)
		if score > bestScore {
			best, bestScore = u, score
		}
	}
	return best
}

func commonPrefix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func commonSuffix(a, b string) int {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return n
}

func equalShape(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func allowed(d DType, ds []DType) bool {
	if len(ds) == 0 {
		return d == BF16 || d == F16 || d == F32
	}
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}
