package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token matched in the text before the model runs (special tokens and the
// like), with Hugging Face's flags.
type AddedToken struct {
	ID         int
	Content    string
	Special    bool
	SingleWord bool // only when not touching a word character on either side
	LStrip     bool // swallows the whitespace before it
	RStrip     bool // swallows the whitespace after it
	Normalized bool // matched in the normalized text, not the raw text
}

// addedMatcher finds added tokens leftmost-longest, as an Aho-Corasick automaton in that mode
// would: the earliest start wins, then the longest token starting there.
type addedMatcher struct {
	byFirst [256][]*AddedToken // tokens by first byte, longest first
	none    bool
}

func newAddedMatcher(tokens []*AddedToken) *addedMatcher {
	m := &addedMatcher{none: true}
	for _, t := range tokens {
		if t.Content == "" {
			continue
		}
		m.byFirst[t.Content[0]] = append(m.byFirst[t.Content[0]], t)
		m.none = false
	}
	for i := range m.byFirst {
		l := m.byFirst[i]
		sort.SliceStable(l, func(a, b int) bool { return len(l[a].Content) > len(l[b].Content) })
	}
	return m
}

func (m *addedMatcher) empty() bool { return m.none }

// segment is a stretch of text: an added token (tok != nil) or plain text for the model.
type segment struct {
	text string
	tok  *AddedToken
}

// split cuts text into plain stretches and added tokens, honouring single_word, lstrip and
// rstrip the way Hugging Face's AddedVocabulary does.
func (m *addedMatcher) split(text string, out []segment) []segment {
	plainFrom := 0
	i := 0
	for i < len(text) {
		cands := m.byFirst[text[i]]
		var hit *AddedToken
		for _, t := range cands {
			if strings.HasPrefix(text[i:], t.Content) {
				hit = t
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		start, stop := i, i+len(hit.Content)
		if hit.SingleWord {
			startOK := start == 0 || !endsWithWord(text[:start])
			stopOK := stop == len(text) || !startsWithWord(text[stop:])
			if !startOK || !stopOK {
				i = stop // the automaton resumes after the match it rejected
				continue
			}
		}
		if hit.LStrip {
			j := start
			for j > plainFrom {
				r, w := utf8.DecodeLastRuneInString(text[plainFrom:j])
				if !unicode.IsSpace(r) {
					break
				}
				j -= w
			}
			start = j
		}
		if hit.RStrip {
			for stop < len(text) {
				r, w := utf8.DecodeRuneInString(text[stop:])
				if !unicode.IsSpace(r) {
					break
				}
				stop += w
			}
		}
		if plainFrom < start {
			out = append(out, segment{text: text[plainFrom:start]})
		}
		out = append(out, segment{text: text[start:stop], tok: hit})
		plainFrom, i = stop, stop
	}
	if plainFrom < len(text) {
		out = append(out, segment{text: text[plainFrom:]})
	}
	return out
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Mc, unicode.Me, unicode.Nl, unicode.No, unicode.Pc)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return isWordRune(r)
}
