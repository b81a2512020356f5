package syntax

import (
	"bytes"
	"strings"
	"text/tabwriter"

	"github.com/alecthomas/participle/v2/lexer"
)

// Format prints f in the canonical form: two-space indentation, one statement a line, columns
// of config and weight blocks aligned, `*` `/` `%` unspaced and other operators spaced, runs of
// blank lines collapsed to one, and every comment kept, on its own line or at the end of the line
// it ended in the source.
func Format(f *File) []byte {
	p := &printer{comments: f.Comments}
	for i, d := range f.Decls {
		p.item(d.Pos, d.EndPos, 0, i == 0, func() { p.decl(d) })
	}
	p.flush(1<<62, 0)
	var out bytes.Buffer
	tw := tabwriter.NewWriter(&out, 1, 8, 1, ' ', tabwriter.StripEscape|tabwriter.DiscardEmptyColumns)
	tw.Write([]byte(strings.TrimLeft(p.buf.String(), "\n")))
	tw.Flush()
	return trimLines(out.Bytes())
}

// FormatSource parses and formats src.
func FormatSource(name, src string) ([]byte, error) {
	f, err := Parse(name, src)
	if err != nil {
		return nil, err
	}
	return Format(f), nil
}

type printer struct {
	buf      strings.Builder
	comments []*Comment
	next     int // first comment not yet printed
	lastLine int // source line where the last printed item ended
}

// maxWidth is the line width a family line's values are wrapped at.
const maxWidth = 100

const esc = "\xff" // tabwriter.Escape: comments are opaque to alignment

// item prints one line-level construct: the comments before it on their own lines, a blank line
// where the source had one, the construct, then the comments that end its last line.
func (p *printer) item(pos, end lexer.Position, depth int, first bool, body func()) {
	p.flush(pos.Offset, depth)
	if !first && p.lastLine > 0 && pos.Line > p.lastLine+1 {
		p.blank()
	}
	p.indent(depth)
	body()
	p.trailing(end)
	p.buf.WriteString("\n")
	p.lastLine = end.Line
	if end.Column == 1 && end.Line > pos.Line {
		p.lastLine = end.Line - 1
	}
}

// flush prints the comments that start before offset on their own lines.
func (p *printer) flush(offset, depth int) {
	for p.next < len(p.comments) && p.comments[p.next].Pos.Offset < offset {
		c := p.comments[p.next]
		if p.lastLine > 0 && c.Pos.Line > p.lastLine+1 {
			p.blank()
		}
		p.indent(depth)
		p.buf.WriteString(esc + c.Text + esc + "\n")
		p.lastLine = c.Pos.Line
		p.next++
	}
}

// trailing appends the comments inside an item or on the line it ends on.
func (p *printer) trailing(end lexer.Position) {
	var parts []string
	for p.next < len(p.comments) {
		c := p.comments[p.next]
		if c.Pos.Offset >= end.Offset && c.Pos.Line != end.Line {
			break
		}
		parts = append(parts, c.Text)
		p.next++
	}
	if len(parts) > 0 {
		p.buf.WriteString("\t" + esc + strings.Join(parts, " ") + esc)
	}
}

func (p *printer) blank() {
	if !strings.HasSuffix(p.buf.String(), "\n\n") {
		p.buf.WriteString("\n")
	}
}

func (p *printer) indent(depth int) { p.buf.WriteString(strings.Repeat("  ", depth)) }

func (p *printer) w(s ...string) {
	for _, x := range s {
		p.buf.WriteString(x)
	}
}

// closeBlock prints the comments left inside a block and its closing brace.
func (p *printer) closeBlock(end lexer.Position, depth int) {
	p.flush(end.Offset-1, depth+1)
	p.indent(depth)
	p.w("}")
}

func (p *printer) decl(d *Decl) {
	switch {
	case d.Family != nil:
		p.w("family ", d.Family.Name, " {")
		p.afterBrace(d.Family.LBrace, firstPos(len(d.Family.Entries) > 0, func() lexer.Position { return d.Family.Entries[0].Pos }))
		for i, e := range d.Family.Entries {
			p.item(e.Pos, e.EndPos, 1, i == 0, func() {
				p.familyEntry(e, 1)
			})
		}
		p.closeBlock(d.EndPos, 0)
	case d.Config != nil:
		p.w("config {")
		p.afterBrace(d.Config.LBrace, firstPos(len(d.Config.Items) > 0, func() lexer.Position { return d.Config.Items[0].Pos }))
		for i, it := range d.Config.Items {
			p.item(it.Pos, it.EndPos, 1, i == 0, func() { p.configItem(it) })
		}
		p.closeBlock(d.EndPos, 0)
	case d.Prefix != nil:
		alts := make([]string, len(d.Prefix.Alts))
		for i, a := range d.Prefix.Alts {
			alts[i] = strings.Join(a.Parts, ".")
		}
		p.w("prefix ", d.Prefix.Name, "\t= ", strings.Join(alts, " | "))
	case d.Weights != nil:
		p.w("weights {")
		p.afterBrace(d.Weights.LBrace, firstPos(len(d.Weights.Items) > 0, func() lexer.Position { return d.Weights.Items[0].Pos }))
		for i, wd := range d.Weights.Items {
			p.item(wd.Pos, wd.EndPos, 1, i == 0, func() { p.weight(wd) })
		}
		p.closeBlock(d.EndPos, 0)
	case d.Rule != nil:
		p.w(d.Rule.Kind, " ", CallString(d.Rule.Call))
	case d.Graph != nil:
		p.graph(d.Graph)
	}
}

// familyEntry prints a family line; values that would pass the line width go one a line,
// aligned under the first.
func (p *printer) familyEntry(e *FamilyEntry, depth int) {
	label := ""
	if e.Label != "" {
		label = e.Label + ": "
	}
	one := label + strings.Join(e.Values, ", ")
	if len(e.Values) == 1 || 2*depth+len(e.Key)+1+len(one) <= maxWidth {
		p.w(e.Key, "\t", one)
		return
	}
	for i, v := range e.Values {
		if i > 0 {
			p.w(",\n")
			p.indent(depth)
			p.w("\t", v)
			continue
		}
		p.w(e.Key, "\t", label, v)
	}
}

func (p *printer) configItem(it *ConfigItem) {
	if it.Require != nil {
		p.w(RequireString(it.Require))
		return
	}
	b := it.Binding
	alts := make([]string, len(b.Alts))
	for i, a := range b.Alts {
		alts[i] = ExprString(a)
	}
	if b.Type == nil {
		p.w(b.Name, "\t= ", strings.Join(alts, " | "))
		return
	}
	p.w(b.Name, "\t", TypeString(b.Type), "\t= ", strings.Join(alts, " | "))
}

func (p *printer) weight(wd *WeightDecl) {
	p.w(WeightName(wd))
	if wd.Shape != nil {
		p.w("\t", ListString(wd.Shape))
	}
	if wd.Cond != nil {
		p.w(" if ", ExprString(wd.Cond))
	}
}

func (p *printer) graph(g *Graph) {
	if g.From != nil {
		p.w("graph ", g.Name, " = ", g.From.Family, ".", g.From.Graph)
		return
	}
	head := "graph " + g.Name + "("
	p.w(head)
	for i, prm := range g.Params {
		if i > 0 {
			if prm.Pos.Line > g.Params[i-1].Pos.Line {
				p.w(",")
				p.lineComments(prm.Pos)
				p.w("\n", strings.Repeat(" ", len(head)))
			} else {
				p.w(", ")
			}
		}
		p.w(prm.Name, " ", ParamTypeString(prm.Type))
	}
	p.w(")")
	switch len(g.Results) {
	case 0:
	case 1:
		p.w(" -> ", ParamTypeString(g.Results[0]))
	default:
		rs := make([]string, len(g.Results))
		for i, r := range g.Results {
			rs[i] = ParamTypeString(r)
		}
		p.w(" -> (", strings.Join(rs, ", "), ")")
	}
	p.w(" {")
	p.afterBrace(g.LBrace, firstPos(len(g.Body) > 0, func() lexer.Position { return g.Body[0].Pos }))
	p.stmts(g.Body, 1)
	p.closeBlock(g.EndPos, 0)
}

// afterBrace ends an opening line: the comments on the brace's line follow it, and the items of
// the block start on the next line.
func (p *printer) afterBrace(b *Brace, first lexer.Position) {
	var parts []string
	for p.next < len(p.comments) {
		c := p.comments[p.next]
		if c.Pos.Line != b.Pos.Line || c.Pos.Offset < b.Pos.Offset || (first.Line > 0 && c.Pos.Offset > first.Offset) {
			break
		}
		parts = append(parts, c.Text)
		p.next++
	}
	if len(parts) > 0 {
		p.w(" ", esc+strings.Join(parts, " ")+esc)
	}
	p.w("\n")
	p.lastLine = b.Pos.Line
}

// lineComments appends the comments that come before next, for a construct broken over lines.
func (p *printer) lineComments(next lexer.Position) {
	var parts []string
	for p.next < len(p.comments) && p.comments[p.next].Pos.Offset < next.Offset {
		parts = append(parts, p.comments[p.next].Text)
		p.next++
	}
	if len(parts) > 0 {
		p.w(" ", esc+strings.Join(parts, " ")+esc)
	}
}

// firstPos is the position of a block's first item, or the zero position for an empty block.
func firstPos(ok bool, f func() lexer.Position) lexer.Position {
	if !ok {
		return lexer.Position{}
	}
	return f()
}

func (p *printer) stmts(body []*Stmt, depth int) {
	for i, s := range body {
		p.item(s.Pos, s.EndPos, depth, i == 0, func() { p.stmt(s, depth) })
	}
}

func (p *printer) stmt(s *Stmt, depth int) {
	switch {
	case s.Assign != nil:
		names := make([]string, len(s.Assign.Names))
		for i, n := range s.Assign.Names {
			names[i] = n.Name
		}
		p.w(strings.Join(names, ", "), " = ", ExprString(s.Assign.Value))
	case s.Return != nil:
		vals := make([]string, len(s.Return.Values))
		for i, v := range s.Return.Values {
			vals[i] = ExprString(v)
		}
		p.w("return ", strings.Join(vals, ", "))
	case s.Require != nil:
		p.w(RequireString(s.Require))
	case s.For != nil:
		f := s.For
		p.w("for ", f.Var, " < ", ExprString(f.Bound), " {")
		p.afterBrace(f.LBrace, firstPos(len(f.Body) > 0, func() lexer.Position { return f.Body[0].Pos }))
		p.stmts(f.Body, depth+1)
		p.closeBlock(s.EndPos, depth)
	}
}

// trimLines removes trailing spaces that alignment leaves on lines and ends with one newline.
func trimLines(b []byte) []byte {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return []byte(strings.TrimRight(strings.Join(lines, "\n"), "\n") + "\n")
}
