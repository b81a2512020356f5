package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// qwenPattern is the Split regex of the Qwen2/2.5/3 and Qwen2-VL tokenizers. Its lookahead
// `\s+(?!\S)` is beyond Go's regexp, so splitQwen matches it by hand; any other pattern goes to
// regexp2, a backtracking engine with lookaround.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// gpt2Pattern is the regex the ByteLevel pre-tokenizer applies when its use_regex is set.
const gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// splitter cuts normalized text into the pieces BPE merges within; a piece never spans two.
type splitter interface {
	split(text string, emit func(piece string))
}

// newSplitter reads the pre_tokenizer of tokenizer.json: byte-level with or without a Split regex.
func newSplitter(p *preTokenJSON) (splitter, error) {
	if p == nil {
		return nil, fmt.Errorf("tokenizer.json has no pre_tokenizer; only byte-level BPE (Qwen, GPT-2 style) is supported")
	}
	steps := []preTokenJSON{*p}
	if p.Type == "Sequence" {
		steps = p.PreTokenizers
	}
	var regex string
	byteLevel := false
	for _, s := range steps {
		switch s.Type {
		case "Split":
			if regex != "" {
				return nil, fmt.Errorf("tokenizer.json pre_tokenizer has two Split steps; only one is supported")
			}
			if s.Pattern == nil || s.Pattern.Regex == nil {
				return nil, fmt.Errorf("tokenizer.json Split pre-tokenizer without a Regex pattern is not supported")
			}
			if s.Behavior != "Isolated" || s.Invert {
				return nil, fmt.Errorf("tokenizer.json Split pre-tokenizer with behavior %q invert=%v is not supported (only Isolated)", s.Behavior, s.Invert)
			}
			regex = *s.Pattern.Regex
		case "ByteLevel":
			if byteLevel {
				return nil, fmt.Errorf("tokenizer.json pre_tokenizer has two ByteLevel steps")
			}
			byteLevel = true
			if s.AddPrefixSpace {
				return nil, fmt.Errorf("tokenizer.json ByteLevel pre-tokenizer with add_prefix_space is not supported")
			}
			if s.UseRegex == nil || *s.UseRegex {
				if regex != "" {
					return nil, fmt.Errorf("tokenizer.json has both a Split regex and a ByteLevel regex; not supported")
				}
				regex = gpt2Pattern
			}
		default:
			return nil, fmt.Errorf("tokenizer.json pre-tokenizer %q is not supported (only Split and ByteLevel)", s.Type)
		}
	}
	if !byteLevel {
		return nil, fmt.Errorf("tokenizer.json pre_tokenizer has no ByteLevel step; only byte-level BPE is supported")
	}
	if regex == qwenPattern {
		return qwenSplitter{}, nil
	}
	if regex == "" {
		return wholeSplitter{}, nil
	}
	return newRegexSplitter(regex)
}

// wholeSplitter keeps the text as one piece.
type wholeSplitter struct{}

func (wholeSplitter) split(text string, emit func(string)) {
	if text != "" {
		emit(text)
	}
}

// regexSplitter isolates every match of a pattern (and the gaps between matches) with regexp2.
type regexSplitter struct {
	re *regexp2.Regexp
}

func newRegexSplitter(pattern string) (regexSplitter, error) {
	re, err := regexp2.Compile(pattern, regexp2.Unicode)
	if err != nil {
		return regexSplitter{}, fmt.Errorf("tokenizer.json Split regex %q does not compile: %v", pattern, err)
	}
	return regexSplitter{re: re}, nil
}

func (s regexSplitter) split(text string, emit func(string)) {
	runes := []rune(text)
	// regexp2 reports rune offsets; turn them into byte offsets.
	byteAt := make([]int, len(runes)+1)
	off := 0
	for i, r := range runes {
		byteAt[i] = off
		off += utf8.RuneLen(r)
	}
	byteAt[len(runes)] = off
	last := 0
	m, _ := s.re.FindRunesMatch(runes)
	for m != nil {
		start, end := m.Index, m.Index+m.Length
		if start > last {
			emit(text[byteAt[last]:byteAt[start]])
		}
		if end > start {
			emit(text[byteAt[start]:byteAt[end]])
		}
		last = end
		m, _ = s.re.FindNextMatch(m)
	}
	if last < len(runes) {
		emit(text[byteAt[last]:])
	}
}

// qwenSplitter matches qwenPattern by hand: at each position the first alternative that matches
// wins, with the length a backtracking engine gives it. Every character starts some alternative,
// so the matches tile the text.
type qwenSplitter struct{}

func (qwenSplitter) split(text string, emit func(string)) {
	for i := 0; i < len(text); {
		n := qwenMatch(text, i)
		emit(text[i : i+n])
		i += n
	}
}

type class uint8

const (
	clsOther class = iota
	clsLetter
	clsNumber
	clsSpace // \s other than \r and \n
	clsNewline
)

func classify(r rune) class {
	if r < 1<<16 {
		return bmpClass[r]
	}
	return classifySlow(r)
}

func classifySlow(r rune) class {
	switch {
	case r == '\r' || r == '\n':
		return clsNewline
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// bmpClass holds the class of every rune of the Basic Multilingual Plane.
var bmpClass = func() *[1 << 16]class {
	var t [1 << 16]class
	for r := range t {
		t[r] = classifySlow(rune(r))
	}
	return &t
}()

func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// qwenMatch returns the length of the qwenPattern match that starts at byte i of s.
func qwenMatch(s string, i int) int {
	r, w := runeAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' && i+1 < len(s) {
		if n := contraction(s[i+1:]); n > 0 {
			return 1 + n
		}
	}
	c := classify(r)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == clsLetter {
		return w + letterRun(s, i+w)
	}
	if c == clsOther || c == clsSpace {
		if i+w < len(s) {
			if n := letterRun(s, i+w); n > 0 {
				return w + n
			}
		}
	}
	// \p{N}
	if c == clsNumber {
		return w
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	if c == clsOther || (r == ' ' && i+1 < len(s) && classifyAt(s, i+1) == clsOther) {
		j := i
		if r == ' ' {
			j++
		}
		for j < len(s) {
			r2, w2 := runeAt(s, j)
			if classify(r2) != clsOther {
				break
			}
			j += w2
		}
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j - i
	}
	// Only whitespace is left. End of the whitespace run, and end of its last \r or \n.
	end, lastNL := i, -1
	for end < len(s) {
		r2, w2 := runeAt(s, end)
		cl := classify(r2)
		if cl != clsSpace && cl != clsNewline {
			break
		}
		if cl == clsNewline {
			lastNL = end + 1
		}
		end += w2
	}
	// \s*[\r\n]+
	if lastNL > 0 {
		return lastNL - i
	}
	// \s+(?!\S): the whole run at the end of the text, else the run less its last character.
	if end == len(s) {
		return end - i
	}
	_, lastW := utf8.DecodeLastRuneInString(s[i:end])
	if end-lastW > i {
		return end - lastW - i
	}
	// \s+
	return end - i
}

func classifyAt(s string, i int) class {
	r, _ := runeAt(s, i)
	return classify(r)
}

// letterRun is the byte length of the run of letters at the start of s[i:].
func letterRun(s string, i int) int {
	j := i
	for j < len(s) {
		r, w := runeAt(s, j)
		if classify(r) != clsLetter {
			break
		}
		j += w
	}
	return j - i
}

// contraction is the length of a case-insensitive s, t, re, ve, m, ll or d at the start of s.
func contraction(s string) int {
	fold := func(i int) (rune, int) {
		if i >= len(s) {
			return 0, 0
		}
		r, w := runeAt(s, i)
		if r == 'ſ' { // LATIN SMALL LETTER LONG S case-folds to s
			return 's', w
		}
		return unicode.ToLower(r), w
	}
	a, wa := fold(0)
	switch a {
	case 's', 't', 'm', 'd':
		return wa
	case 'r', 'v', 'l':
		b, wb := fold(wa)
		if (a == 'r' || a == 'v') && b == 'e' || a == 'l' && b == 'l' {
			return wa + wb
		}
	}
	return 0
}
