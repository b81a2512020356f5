package lower

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"tfc/compiler/ir"
)

// FromDim converts an IR dimension through its printed normal form ("3*VD", "N/(M*M)",
// "sect[0] + sect[1]"); list elements become references named "sect[0]".
func FromDim(d ir.Dim) *Expr {
	e, err := ParseExpr(d.String())
	if err != nil {
		panic(fmt.Sprintf("lower: dim %q: %v", d.String(), err))
	}
	return e
}

// ParseExpr reads an integer expression: literals, names, name[k], + - * / % and parentheses.
func ParseExpr(s string) (*Expr, error) {
	p := &exprParser{src: s}
	e, err := p.sum()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.src) {
		return nil, fmt.Errorf("unexpected %q", p.src[p.i:])
	}
	return e, nil
}

type exprParser struct {
	src string
	i   int
}

func (p *exprParser) space() {
	for p.i < len(p.src) && p.src[p.i] == ' ' {
		p.i++
	}
}

func (p *exprParser) peek() byte {
	p.space()
	if p.i < len(p.src) {
		return p.src[p.i]
	}
	return 0
}

func (p *exprParser) sum() (*Expr, error) {
	e, err := p.product()
	for err == nil {
		c := p.peek()
		if c != '+' && c != '-' {
			return e, nil
		}
		p.i++
		var r *Expr
		if r, err = p.product(); err == nil {
			e = Bin(string(c), e, r)
		}
	}
	return nil, err
}

func (p *exprParser) product() (*Expr, error) {
	e, err := p.unary()
	for err == nil {
		c := p.peek()
		if c != '*' && c != '/' && c != '%' {
			return e, nil
		}
		p.i++
		var r *Expr
		if r, err = p.unary(); err == nil {
			e = Bin(string(c), e, r)
		}
	}
	return nil, err
}

func (p *exprParser) unary() (*Expr, error) {
	switch c := p.peek(); {
	case c == '-':
		p.i++
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if x.Op == "int" {
			return Int(-x.Int), nil
		}
		return &Expr{Op: "neg", Args: []*Expr{x}}, nil
	case c == '(':
		p.i++
		e, err := p.sum()
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, fmt.Errorf("missing ) in %q", p.src)
		}
		p.i++
		return e, nil
	case c >= '0' && c <= '9':
		j := p.i
		for p.i < len(p.src) && p.src[p.i] >= '0' && p.src[p.i] <= '9' {
			p.i++
		}
		n, err := strconv.ParseInt(p.src[j:p.i], 10, 64)
		return Int(n), err
	case c == '_' || unicode.IsLetter(rune(c)):
		j := p.i
		for p.i < len(p.src) && (p.src[p.i] == '_' || unicode.IsLetter(rune(p.src[p.i])) || unicode.IsDigit(rune(p.src[p.i]))) {
			p.i++
		}
		if p.i < len(p.src) && p.src[p.i] == '[' {
			k := strings.IndexByte(p.src[p.i:], ']')
			if k < 0 {
				return nil, fmt.Errorf("missing ] in %q", p.src)
			}
			p.i += k + 1
		}
		return Ref(p.src[j:p.i]), nil
	}
	return nil, fmt.Errorf("unexpected %q in %q", p.src[p.i:], p.src)
}
