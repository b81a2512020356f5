package syntax

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/alecthomas/participle/v2"
	"github.com/alecthomas/participle/v2/lexer"
)

var graphLexer = lexer.MustSimple([]lexer.SimpleRule{
	{Name: "Comment", Pattern: `//[^\n]*`},
	{Name: "String", Pattern: `"(\\.|[^"\\\n])*"`},
	{Name: "Float", Pattern: `\d+\.\d+([eE][-+]?\d+)?|\d+[eE][-+]?\d+`},
	{Name: "Int", Pattern: `\d+`},
	{Name: "Ident", Pattern: `[A-Za-z_][A-Za-z0-9_]*`},
	{Name: "Punct", Pattern: `->|==|!=|<=|>=|[-+*/%<>=!?:,.|()\[\]{}]`},
	{Name: "Whitespace", Pattern: `[ \t\r\n]+`},
})

var parser = participle.MustBuild[File](
	participle.Lexer(graphLexer),
	participle.Elide("Comment", "Whitespace"),
)

// Error is a syntax error at a position.
type Error struct {
	Pos lexer.Position
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Pos, e.Msg) }

// Parse reads one .graph file. On a syntax error it returns an *Error naming the position.
func Parse(name, src string) (*File, error) {
	if err := checkUTF8(name, src); err != nil {
		return nil, err
	}
	comments, lexErr := scanComments(name, src)
	if lexErr != nil {
		return nil, lexErr
	}
	f, err := parser.ParseString(name, src)
	if err != nil {
		return nil, syntaxError(name, src, err)
	}
	f.Name = name
	f.Source = src
	f.Comments = comments
	return f, nil
}

// checkUTF8 refuses a source that is not UTF-8 at its first bad byte (the formatter's alignment
// takes the byte 0xff, which UTF-8 never holds, as its escape).
func checkUTF8(name, src string) error {
	if utf8.ValidString(src) {
		return nil
	}
	pos := lexer.Position{Filename: name, Line: 1, Column: 1}
	for i, r := range src {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(src[i:]); size == 1 {
				pos.Offset = i
				return &Error{Pos: pos, Msg: fmt.Sprintf("invalid UTF-8 byte %#x", src[i])}
			}
		}
		if r == '\n' {
			pos.Line, pos.Column = pos.Line+1, 1
		} else {
			pos.Column++
		}
	}
	return nil
}

// scanComments lexes src once for its comments; a character no token matches is an error here.
func scanComments(name, src string) ([]*Comment, error) {
	lex, err := graphLexer.LexString(name, src)
	if err != nil {
		return nil, lexError(name, err)
	}
	comment := graphLexer.Symbols()["Comment"]
	var out []*Comment
	for {
		t, err := lex.Next()
		if err != nil {
			return nil, lexError(name, err)
		}
		if t.EOF() {
			return out, nil
		}
		if t.Type == comment {
			out = append(out, &Comment{Pos: t.Pos, Text: strings.TrimRight(t.Value, " \t\r")})
		}
	}
}

func lexError(name string, err error) error {
	var pe participle.Error
	if errors.As(err, &pe) {
		msg := strings.TrimPrefix(pe.Message(), "lexer: ")
		if rest, ok := strings.CutPrefix(msg, "invalid input text "); ok {
			text, err := strconv.Unquote(rest)
			if err != nil {
				text = strings.Trim(rest, `"`)
			}
			r := []rune(text)
			switch {
			case len(r) > 0 && r[0] == '"':
				msg = "string not terminated before the end of the line"
			case len(r) > 0:
				msg = fmt.Sprintf("unexpected character %q", r[0])
			default:
				msg = "unexpected character"
			}
		}
		return &Error{Pos: pe.Position(), Msg: msg}
	}
	return &Error{Pos: lexer.Position{Filename: name, Line: 1, Column: 1}, Msg: err.Error()}
}

// syntaxError turns participle's error into one that names the construct; a file that ends
// inside a block points at the block's opening brace.
func syntaxError(name, src string, err error) error {
	var pe participle.Error
	if !errors.As(err, &pe) {
		return &Error{Pos: lexer.Position{Filename: name, Line: 1, Column: 1}, Msg: err.Error()}
	}
	pos := pe.Position()
	msg := pe.Message()
	if pos.Offset >= len(strings.TrimRight(src, " \t\r\n")) || strings.Contains(msg, "<EOF>") {
		if open, ok := unclosedBrace(name, src); ok {
			return &Error{Pos: open, Msg: "unterminated block: this { has no matching }"}
		}
		return &Error{Pos: pos, Msg: "unexpected end of file"}
	}
	msg = strings.ReplaceAll(msg, "unexpected token", "unexpected")
	msg = simplifyExpected(msg)
	if !strings.Contains(msg, "(expected") && braceDepth(name, src, pos.Offset) == 0 {
		msg += "; a declaration starts with family, config, prefix, weights, image, positions or graph"
	}
	return &Error{Pos: pos, Msg: msg}
}

// unclosedBrace finds the innermost { that is still open at the end of src.
func unclosedBrace(name, src string) (lexer.Position, bool) {
	lex, err := graphLexer.LexString(name, src)
	if err != nil {
		return lexer.Position{}, false
	}
	var open []lexer.Position
	for {
		t, err := lex.Next()
		if err != nil || t.EOF() {
			break
		}
		switch t.Value {
		case "{":
			open = append(open, t.Pos)
		case "}":
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		}
	}
	if len(open) == 0 {
		return lexer.Position{}, false
	}
	return open[len(open)-1], true
}

// simplifyExpected keeps the first token of a grammar fragment in "(expected …)":
// `(expected "=" Expr ("|" Expr)*)` becomes `(expected "=")`.
func simplifyExpected(msg string) string {
	i := strings.Index(msg, "(expected ")
	if i < 0 || !strings.HasSuffix(msg, ")") {
		return msg
	}
	exp := msg[i+len("(expected ") : len(msg)-1]
	if strings.HasPrefix(exp, `"`) {
		if j := strings.Index(exp[1:], `"`); j >= 0 {
			exp = exp[:j+2]
		}
	}
	return msg[:i] + "(expected " + exp + ")"
}

// braceDepth counts the braces open before offset.
func braceDepth(name, src string, offset int) int {
	lex, err := graphLexer.LexString(name, src)
	if err != nil {
		return -1
	}
	depth := 0
	for {
		t, err := lex.Next()
		if err != nil || t.EOF() || t.Pos.Offset >= offset {
			return depth
		}
		switch t.Value {
		case "{":
			depth++
		case "}":
			depth--
		}
	}
}
