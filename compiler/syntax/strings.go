package syntax

import "strings"

// ExprString prints an expression in canonical form.
func ExprString(e *Expr) string {
	if e == nil {
		return ""
	}
	s := cmpString(e.Cond)
	if e.Then != nil {
		s += " ? " + ExprString(e.Then) + " : " + ExprString(e.Else)
	}
	return s
}

func cmpString(c *Cmp) string {
	s := sumString(c.Left)
	if c.Op != "" {
		s += " " + c.Op + " " + sumString(c.Right)
	}
	return s
}

func sumString(s *Sum) string {
	out := prodString(s.Left)
	for _, r := range s.Rest {
		out += " " + r.Op + " " + prodString(r.Right)
	}
	return out
}

func prodString(p *Prod) string {
	out := unaryString(p.Left)
	for _, r := range p.Rest {
		out += r.Op + unaryString(r.Right)
	}
	return out
}

func unaryString(u *Unary) string { return u.Op + postfixString(u.X) }

func postfixString(p *Postfix) string {
	out := primaryString(p.X)
	for _, s := range p.Suffix {
		if s.Index != nil {
			out += "[" + ExprString(s.Index) + "]"
		} else {
			out += "." + s.Field
		}
	}
	return out
}

func primaryString(p *Primary) string {
	switch {
	case p.Call != nil:
		return CallString(p.Call)
	case p.Float != "":
		return p.Float
	case p.Int != "":
		return p.Int
	case p.String != "":
		return p.String
	case p.List != nil:
		return ListString(p.List)
	case p.Paren != nil:
		return "(" + ExprString(p.Paren) + ")"
	}
	return p.Ident
}

// CallString prints `name(a, key: b)`.
func CallString(c *Call) string {
	args := make([]string, len(c.Args))
	for i, a := range c.Args {
		args[i] = ExprString(a.Value)
		if a.Key != "" {
			args[i] = a.Key + ": " + args[i]
		}
	}
	return c.Name + "(" + strings.Join(args, ", ") + ")"
}

// ListString prints `[a, b]`.
func ListString(l *List) string {
	parts := make([]string, len(l.Elems))
	for i, e := range l.Elems {
		parts[i] = ExprString(e)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// TypeString prints a config type, or "" for none.
func TypeString(t *TypeRef) string {
	if t == nil {
		return ""
	}
	if t.List {
		return t.Name + "[" + t.Len + "]"
	}
	return t.Name
}

// ParamTypeString prints a graph parameter or result type.
func ParamTypeString(t *ParamType) string {
	switch {
	case t.Kind != "":
		return t.Kind
	case t.KV != nil:
		return "kv" + ListString(t.KV)
	case t.Positions != nil:
		return "positions" + ListString(t.Positions)
	}
	s := ListString(t.Shape)
	if t.DType != "" {
		s += " " + t.DType
	}
	return s
}

// RequireString prints `require a, b`.
func RequireString(r *Require) string {
	conds := make([]string, len(r.Conds))
	for i, c := range r.Conds {
		conds[i] = ExprString(c)
	}
	return "require " + strings.Join(conds, ", ")
}

// WeightName prints a weight line's name with its ranges and group.
func WeightName(wd *WeightDecl) string {
	parts := make([]string, len(wd.Segs))
	for i, s := range wd.Segs {
		parts[i] = SegString(s)
	}
	return strings.Join(parts, ".")
}

// SegString prints one name segment.
func SegString(s *Seg) string {
	if s.Leaves != nil {
		ls := make([]string, len(s.Leaves))
		for i, l := range s.Leaves {
			ls[i] = l.Name
			if l.Shape != nil {
				ls[i] += " " + ListString(l.Shape)
			}
		}
		return "{" + strings.Join(ls, ", ") + "}"
	}
	if s.Range != nil {
		return s.Name + "[" + s.Range.Var + " < " + ExprString(s.Range.Bound) + "]"
	}
	return s.Name
}
