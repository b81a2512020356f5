package tokenizer

import (
	"unicode/utf8"
)

// Decode returns the text of ids: every token's bytes joined, invalid UTF-8 replaced by U+FFFD as
// Hugging Face's ByteLevel decoder does. Ids the tokenizer does not define are skipped; so are
// special tokens when skipSpecial is set.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	return string(appendLossy(nil, t.appendBytes(nil, ids, skipSpecial)))
}

// DecodeBytes returns the raw bytes of ids, which need not be valid UTF-8.
func (t *Tokenizer) DecodeBytes(ids []int, skipSpecial bool) []byte {
	return t.appendBytes(nil, ids, skipSpecial)
}

func (t *Tokenizer) appendBytes(buf []byte, ids []int, skipSpecial bool) []byte {
	for _, id := range ids {
		if id < 0 || id >= len(t.rawBytes) {
			continue
		}
		if skipSpecial && t.IsSpecial(id) {
			continue
		}
		buf = append(buf, t.rawBytes[id]...)
	}
	return buf
}

// appendLossy appends b to dst with each maximal invalid UTF-8 subpart replaced by one U+FFFD,
// the rule of Rust's String::from_utf8_lossy.
func appendLossy(dst, b []byte) []byte {
	for i := 0; i < len(b); {
		if b[i] < utf8.RuneSelf {
			dst = append(dst, b[i])
			i++
			continue
		}
		n, complete := utf8Prefix(b[i:])
		if complete {
			dst = append(dst, b[i:i+n]...)
		} else {
			dst = append(dst, "\uFFFD"...)
		}
		i += n
	}
	return dst
}

// utf8Prefix reads the sequence that starts b (b[0] is not ASCII): n is the length of the longest
// prefix that could begin a valid character (at least 1), complete whether it is one.
func utf8Prefix(b []byte) (n int, complete bool) {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1, false
	}
	n = 1
	for k := 0; k < need; k++ {
		if n >= len(b) || b[n] < lo || b[n] > hi {
			return n, false
		}
		n++
		lo, hi = 0x80, 0xBF
	}
	return n, true
}

// incompleteTail is the length of a trailing sequence of b that is a valid but unfinished UTF-8
// character: bytes that a later token may complete.
func incompleteTail(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		start := len(b) - k
		if b[start] < 0x80 {
			return 0
		}
		if b[start] < 0xC0 {
			continue // a continuation byte: keep looking back for the lead
		}
		if b[start] < 0xC2 || b[start] > 0xF4 {
			return 0 // never a lead byte
		}
		n, complete := utf8Prefix(b[start:])
		if !complete && n == k {
			return k
		}
		return 0
	}
	return 0
}

// StreamDecoder turns ids, a few at a time, into text chunks whose concatenation equals Decode
// of all the ids: bytes of an unfinished character wait for the next ids.
type StreamDecoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
}

// NewStreamDecoder starts a stream.
func (t *Tokenizer) NewStreamDecoder(skipSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, skipSpecial: skipSpecial}
}

// Next adds ids and returns the text that is now complete (possibly "").
func (d *StreamDecoder) Next(ids ...int) string {
	d.pending = d.t.appendBytes(d.pending, ids, d.skipSpecial)
	keep := incompleteTail(d.pending)
	out := appendLossy(nil, d.pending[:len(d.pending)-keep])
	d.pending = append(d.pending[:0], d.pending[len(d.pending)-keep:]...)
	return string(out)
}

// Flush returns what is left, an unfinished character as U+FFFD, and resets the stream.
func (d *StreamDecoder) Flush() string {
	out := appendLossy(nil, d.pending)
	d.pending = d.pending[:0]
	return string(out)
}
