// Package pdftest writes small PDFs for tests: pages of text in Helvetica, and the broken kinds
// a server must refuse (encrypted, truncated, without pages).
package pdftest

import (
	"bytes"
	"fmt"
	"strings"
)

// Page is one page: its size in points and its lines of text, top to bottom.
type Page struct {
	Width, Height float64
	Lines         []string
}

// Options change the file written.
type Options struct {
	Encrypt bool // add a standard security handler whose user password is not empty
}

// Write returns a PDF holding the pages (none gives a document without pages).
func Write(pages []Page, o Options) []byte {
	var b bytes.Buffer
	var offsets []int
	obj := func(body string) int {
		offsets = append(offsets, b.Len())
		n := len(offsets)
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", n, body)
		return n
	}
	b.WriteString("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
	obj("<< /Type /Catalog /Pages 2 0 R >>")
	// the page tree's kids are known once the pages are written: objects 4, 6, 8, … (3 is the font)
	kids := make([]string, len(pages))
	for i := range pages {
		kids[i] = fmt.Sprintf("%d 0 R", 4+2*i)
	}
	obj(fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	obj("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	for i, p := range pages {
		var c strings.Builder
		c.WriteString("BT /F1 12 Tf 14 TL\n")
		fmt.Fprintf(&c, "10 %g Td\n", p.Height-20)
		for _, l := range p.Lines {
			fmt.Fprintf(&c, "(%s) Tj T*\n", escape(l))
		}
		c.WriteString("ET")
		obj(fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 %g %g] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>",
			p.Width, p.Height, 5+2*i))
		obj(fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", c.Len(), c.String()))
	}
	trailer := fmt.Sprintf("/Size %d /Root 1 0 R", len(offsets)+1)
	if o.Encrypt {
		n := obj("<< /Filter /Standard /V 1 /R 2 /O <" + strings.Repeat("5a", 32) + "> /U <" + strings.Repeat("a5", 32) + "> /P -4 >>")
		trailer = fmt.Sprintf("/Size %d /Root 1 0 R /Encrypt %d 0 R /ID [<%s> <%s>]", len(offsets)+1, n, strings.Repeat("01", 16), strings.Repeat("01", 16))
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(offsets)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n", trailer, xref)
	return b.Bytes()
}

// escape quotes a PDF literal string's delimiters.
func escape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`).Replace(s)
}

// TwoPages is a small two-page document of a few lines each (2 by 1.5 inches a page).
func TwoPages() []byte {
	return Write([]Page{
		{Width: 144, Height: 108, Lines: []string{"Page one.", "Hello, tfc."}},
		{Width: 144, Height: 108, Lines: []string{"Page two.", "12 + 30 = 42"}},
	}, Options{})
}
