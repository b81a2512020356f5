package lower

import (
	"fmt"
	"slices"
	"strings"

	"tfc/runtime/device/catalog"
)

// class is a set of values that must share one buffer: a value and the ops that overwrite it
// in place, and the values a loop carries.
type class struct {
	members []*Value
	buffer  *Buffer
	dtype   string
	size    *Expr
}

// inplace lists the operand fields whose buffer an op's output may take over (the catalog's Reuse).
func inplace(kind string) []string {
	var out []string
	if s := catalog.Find(kind); s != nil {
		for _, t := range s.Tensors {
			if t.Reuse {
				out = append(out, t.Path)
			}
		}
	}
	return out
}

// PlanMemory assigns every activation and input a buffer by liveness. Values an op may
// overwrite exactly (a residual, an elementwise input) share its output's buffer when they die
// there; values whose lifetimes do not overlap share an arena slot whose size is the largest of
// theirs. Every value a launch touches is live for the whole launch.
func PlanMemory(g *Graph) error {
	m := &planner{g: g, defLoop: map[*Value]*Loop{}, okPair: map[[2]*Value]bool{}}
	m.liveness()
	m.inPlacePairs()
	if err := m.unite(); err != nil {
		return err
	}
	m.pack()
	if err := verifyPlan(g, m.okPair); err != nil {
		return err
	}
	for _, a := range g.Arenas {
		off := Int(0)
		for _, buf := range a.Buffers {
			buf.Offset = off
			off = Fold(Add(off, buf.Size), nil)
		}
		a.Size = off
	}
	return nil
}

// planner holds the memory plan's working state.
type planner struct {
	g       *Graph
	defLoop map[*Value]*Loop   // the innermost loop around each definition
	okPair  map[[2]*Value]bool // (input, output) an op may overwrite in place
	end     int                // schedule index after the last op
}

// owns reports whether v holds data of its own (a buffer, or an in-place rewrite of one).
func owns(v *Value) bool { return v.Kind == Activation || v.Kind == Input || v.Kind == Alias }

// reader maps a use of v (through views) to the value whose lifetime it extends.
func reader(v *Value) *Value {
	for v.Kind == View {
		v = v.Base
	}
	return v
}

func use(v *Value, at int) {
	if v = reader(v); owns(v) && at > v.last {
		v.last = at
	}
}

// liveness numbers the schedule (a loop's head and back edge get indices of their own) and sets
// every value's first and last index: a launch's values live for all of it, a value read inside
// a loop it was not defined in lives through the loop, a carried value until the back edge.
func (m *planner) liveness() {
	idx := 0
	var number func(steps []*Step)
	number = func(steps []*Step) {
		for _, s := range steps {
			if s.Loop != nil {
				s.Loop.start = idx
				idx++
				number(s.Loop.Steps)
				s.Loop.end = idx
				idx++
				continue
			}
			for _, op := range s.Launch.Ops {
				op.index = idx
				idx++
			}
		}
	}
	number(m.g.Steps)
	m.end = idx
	for _, v := range m.g.Values {
		v.first, v.last, v.class = -1, -1, nil
	}
	m.walk(m.g.Steps, nil)
	use(m.g.Output, m.end)
	if m.g.Picks != nil {
		use(m.g.Picks, m.end)
	}
	for _, v := range m.g.Values {
		if owns(v) && v.last < v.first {
			v.last = v.first
		}
	}
}

func (m *planner) walk(steps []*Step, loops []*Loop) {
	var inner *Loop
	if len(loops) > 0 {
		inner = loops[len(loops)-1]
	}
	for _, s := range steps {
		if l := s.Loop; l != nil {
			for _, c := range l.Carry {
				use(c.Init, l.start)
				c.Param.first = l.start
				m.defLoop[c.Param] = l
				c.Result.first = l.end
				m.defLoop[c.Result] = inner
			}
			m.walk(l.Steps, append(loops, l))
			for _, c := range l.Carry {
				use(c.Yield, l.end)
			}
			continue
		}
		lo, hi := s.Launch.Ops[0].index, s.Launch.Ops[len(s.Launch.Ops)-1].index
		for _, op := range s.Launch.Ops {
			if op.Out != nil && owns(op.Out) && op.Out.first < 0 {
				op.Out.first = lo
				m.defLoop[op.Out] = inner
			}
			for _, a := range op.Args {
				if a.Field == "Y" && a.Value == op.Out {
					continue
				}
				for _, r := range operands(a.Value) {
					r = reader(r)
					use(r, hi)
					for k := len(loops) - 1; k >= 0 && !enclosedBy(m.defLoop, r, loops[k]); k-- {
						use(r, loops[k].end)
					}
				}
			}
		}
	}
}

// inPlacePairs records the (input, output) pairs that may share storage: an op's output and an
// input it may overwrite exactly (same shape and dtype), and every in-place rewrite and its base.
func (m *planner) inPlacePairs() {
	for _, op := range m.g.Ops() {
		for _, f := range inplace(op.Kind) {
			in := op.Arg(f)
			if in == nil || op.Out == nil || (in.Kind != Activation && in.Kind != Alias) {
				continue
			}
			if sameShape(in, op.Out) && in.DType == op.Out.DType {
				m.okPair[[2]*Value{in, op.Out}] = true
			}
		}
	}
	for _, v := range m.g.Values {
		if v.Kind == Alias {
			m.okPair[[2]*Value{v.Base.Storage(), v}] = true
			m.okPair[[2]*Value{reader(v.Base), v}] = true
		}
	}
}

// compatible reports whether two classes may share storage: no two of their values are live at
// once, except (unless strict) an input and the output an op writes over it.
func (m *planner) compatible(a, b *class, strict bool) bool {
	for _, x := range a.members {
		for _, y := range b.members {
			if x.last < y.first || y.last < x.first {
				continue
			}
			if !strict && (m.okPair[[2]*Value{x, y}] || m.okPair[[2]*Value{y, x}]) {
				continue
			}
			return false
		}
	}
	return true
}

func union(a, b *class) *class {
	if a == b {
		return a
	}
	a.members = append(a.members, b.members...)
	for _, v := range b.members {
		v.class = a
	}
	return a
}

// unite builds the classes: every buffer-owning value alone, then each in-place rewrite with its
// base, each loop's carried values together, and each op's output with an input it may
// overwrite when that input dies there.
func (m *planner) unite() error {
	g := m.g
	for _, v := range g.Values {
		if owns(v) && v.Kind != Alias && (v.Kind == Input || v.first >= 0) {
			v.class = &class{members: []*Value{v}, dtype: v.DType, size: Fold(Mul(FromDim(v.Rows), FromDim(v.Cols)), nil)}
		}
	}
	for _, v := range g.Values {
		if v.Kind == Alias && v.Base.Storage().class != nil {
			v.class = union(v.Base.Storage().class, &class{members: []*Value{v}})
		}
	}
	var err error
	g.walkLoops(g.Steps, func(l *Loop) {
		for _, c := range l.Carry {
			a, b := c.Init.Storage().class, c.Yield.Storage().class
			if a != b && !m.compatible(a, b, false) && err == nil {
				err = fmt.Errorf("%s: loop %s carries %s, but the value it yields is still in use when the next iteration starts", l.Pos, l.Var, c.Init.Name)
			}
			union(a, b)
		}
	})
	if err != nil {
		return err
	}
	for _, op := range g.Ops() {
		for _, f := range inplace(op.Kind) {
			in := op.Arg(f)
			if in == nil || !m.okPair[[2]*Value{in, op.Out}] {
				continue
			}
			if a, b := in.Storage().class, op.Out.Storage().class; a != b && m.compatible(a, b, false) {
				union(a, b)
				break
			}
		}
	}
	return nil
}

// pack places the classes, in order of first definition, into slots of their dtype's arena: a
// class takes the first slot whose classes it never overlaps (preferring one of its own size),
// growing the slot to the larger size, or opens a new slot. I32 inputs get slots of their own.
func (m *planner) pack() {
	g := m.g
	var classes []*class
	seen := map[*class]bool{}
	for _, v := range g.Values {
		if c := v.class; c != nil && !seen[c] {
			seen[c] = true
			classes = append(classes, c)
		}
	}
	slices.SortStableFunc(classes, func(a, b *class) int { return a.start() - b.start() })
	g.Arenas = nil
	arenaOf := map[string]*Arena{}
	slotClasses := map[*Buffer][]*class{}
	names := map[string]int{}
	for _, c := range classes {
		a := arenaOf[c.dtype]
		if a == nil {
			a = &Arena{DType: c.dtype}
			arenaOf[c.dtype] = a
			g.Arenas = append(g.Arenas, a)
		}
		var pick *Buffer
		for _, buf := range a.Buffers {
			free := true
			for _, other := range slotClasses[buf] {
				free = free && m.compatible(c, other, true)
			}
			if free && (pick == nil || buf.Size.Equal(c.size) && !pick.Size.Equal(c.size)) {
				pick = buf
			}
		}
		if pick == nil || c.dtype == "I32" {
			name := c.name()
			if n := names[name]; n > 0 {
				name = fmt.Sprintf("%s%d", name, n+1)
			}
			names[c.name()]++
			pick = &Buffer{Name: name, Size: c.size}
			a.Buffers = append(a.Buffers, pick)
		} else {
			pick.Size = Max(pick.Size, c.size)
		}
		slotClasses[pick] = append(slotClasses[pick], c)
		c.buffer = pick
		pick.Values = append(pick.Values, c.members...)
	}
	slices.SortFunc(g.Arenas, func(a, b *Arena) int { return strings.Compare(a.DType, b.DType) })
}

// start is the first schedule index of any of the class's values.
func (c *class) start() int {
	s := c.members[0].first
	for _, v := range c.members {
		s = min(s, v.first)
	}
	return s
}

// enclosedBy reports whether v is defined inside loop l.
func enclosedBy(defLoop map[*Value]*Loop, v *Value, l *Loop) bool {
	for d := defLoop[v]; d != nil; d = d.parent {
		if d == l {
			return true
		}
	}
	return false
}

// operands lists the tensors a value stands for: itself, or the tensors of a rows description.
func operands(v *Value) []*Value {
	switch v.Kind {
	case RowsRef:
		return []*Value{v.RowSeq, v.RowPos, v.PageTable}
	case Select:
		return append(operands(v.Then), operands(v.Else)...)
	}
	return []*Value{v}
}

// name is the name most of the class's values have (the residual stream's "x"), the first on a tie.
func (c *class) name() string {
	count := map[string]int{}
	best := c.members[0].Name
	for _, v := range c.members {
		count[v.Name]++
		if count[v.Name] > count[best] {
			best = v.Name
		}
	}
	return best
}

// StorageName names the set of values that share v's storage by an in-place chain or a loop
// carry; "" for values without a buffer.
func (v *Value) StorageName() string {
	s := v.Storage()
	if s.class == nil {
		return ""
	}
	return s.class.name()
}

// verifyPlan checks the plan's invariant: two values in one buffer are never live at once,
// unless one is an op's input that the op overwrites exactly with the other.
func verifyPlan(g *Graph, okPair map[[2]*Value]bool) error {
	for _, a := range g.Arenas {
		for _, b := range a.Buffers {
			for i, x := range b.Values {
				for _, y := range b.Values[i+1:] {
					if x.last < y.first || y.last < x.first || okPair[[2]*Value{x, y}] || okPair[[2]*Value{y, x}] {
						continue
					}
					if x.class == y.class && (x.Kind == Alias || y.Kind == Alias) {
						continue
					}
					return fmt.Errorf("graph %s: memory plan puts %s (live %d..%d) and %s (live %d..%d) in buffer %s at once", g.Name, x.Name, x.first, x.last, y.Name, y.first, y.last, b.Name)
				}
			}
		}
	}
	return nil
}
