package check

import (
	"fmt"
	"sort"
	"strings"

	"tfc/compiler/ir"
)

// Diagnostic is one problem found in a .graph file.
type Diagnostic struct {
	Pos ir.Pos
	Msg string
}

func (d Diagnostic) Error() string { return d.Pos.String() + ": " + d.Msg }

// Diagnostics are all the problems of a file, in source order. As an error it prints them one a
// line without source excerpts; Format adds the excerpts.
type Diagnostics []Diagnostic

func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.Error()
	}
	return strings.Join(lines, "\n")
}

// Format prints every diagnostic Go-style, `file:line:col: message`, followed by the source
// line (indented by a tab) and a caret under the column.
func (ds Diagnostics) Format(src string) string {
	lines := strings.Split(src, "\n")
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "%s\n", d.Error())
		if d.Pos.Line < 1 || d.Pos.Line > len(lines) {
			continue
		}
		line := strings.TrimRight(lines[d.Pos.Line-1], "\r")
		b.WriteString("\t" + line + "\n\t")
		col := 1
		for _, r := range line {
			if col >= d.Pos.Col {
				break
			}
			if r == '\t' {
				b.WriteByte('\t')
			} else {
				b.WriteByte(' ')
			}
			col++
		}
		b.WriteString("^\n")
	}
	return b.String()
}

func (ds Diagnostics) sorted() Diagnostics {
	sort.SliceStable(ds, func(i, j int) bool {
		a, b := ds[i].Pos, ds[j].Pos
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Col < b.Col
	})
	out := ds[:0]
	for i, d := range ds {
		if i > 0 && d == ds[i-1] {
			continue
		}
		out = append(out, d)
	}
	return out
}
