package tokenizer

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// byteToRune is GPT-2's byte-to-unicode map: printable Latin-1 bytes stand for themselves, the
// other 68 bytes are moved to U+0100 and up, so that every byte has a visible character.
var byteToRune, runeToByte = byteLevelAlphabet()

func byteLevelAlphabet() ([256]rune, map[rune]byte) {
	var b2r [256]rune
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if printable(b) {
			b2r[b] = rune(b)
		} else {
			b2r[b] = rune(256 + n)
			n++
		}
	}
	r2b := make(map[rune]byte, 256)
	for b, r := range b2r {
		r2b[r] = byte(b)
	}
	return b2r, r2b
}

// byteLevelBytes turns a vocabulary string (byte-level alphabet) back into the raw bytes it stands
// for; ok is false when the string has a character outside that alphabet.
func byteLevelBytes(s string) (raw []byte, ok bool) {
	raw = make([]byte, 0, len(s))
	for _, r := range s {
		b, in := runeToByte[r]
		if !in {
			return nil, false
		}
		raw = append(raw, b)
	}
	return raw, true
}

// byteLevelString writes raw bytes in the byte-level alphabet, as the vocabulary spells them.
func byteLevelString(raw []byte) string {
	buf := make([]byte, 0, 2*len(raw))
	for _, b := range raw {
		buf = utf8.AppendRune(buf, byteToRune[b])
	}
	return string(buf)
}

// merge is what the merge list says about one adjacent pair of token ids.
type merge struct {
	rank  int32
	newID int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpe is the byte-level BPE model: the id of each single byte and the ranked merges over ids.
type bpe struct {
	byteID [256]int32
	merges map[uint64]merge
	cache  wordCache
}

func newBPE(vocab map[string]int, pairs [][2]string) (*bpe, error) {
	m := &bpe{merges: make(map[uint64]merge, len(pairs))}
	for b := 0; b < 256; b++ {
		id, ok := vocab[string(byteToRune[b])]
		if !ok {
			return nil, fmt.Errorf("the vocabulary lacks the byte-level token for byte 0x%02x (%q); this is not a byte-level BPE tokenizer", b, byteToRune[b])
		}
		m.byteID[b] = int32(id)
	}
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		c, okC := vocab[p[0]+p[1]]
		if !okA || !okB || !okC {
			return nil, fmt.Errorf("merge %d (%q %q) names a token missing from the vocabulary", rank, p[0], p[1])
		}
		k := pairKey(int32(a), int32(b))
		if _, dup := m.merges[k]; !dup {
			m.merges[k] = merge{rank: int32(rank), newID: int32(c)}
		}
	}
	m.cache.init()
	return m, nil
}

// encodeWord appends the ids of one pre-tokenized piece (raw bytes) to ids.
func (m *bpe) encodeWord(ids []int, word string) []int {
	if len(word) == 1 {
		return append(ids, int(m.byteID[word[0]]))
	}
	if got, ok := m.cache.get(word); ok {
		return append(ids, got...)
	}
	start := len(ids)
	if len(word) <= scanLimit {
		ids = m.mergeScan(ids, word)
	} else {
		ids = m.mergeHeap(ids, word)
	}
	m.cache.put(word, ids[start:])
	return ids
}

// scanLimit is the piece length up to which merges are found by scanning the pairs; longer pieces
// use a heap so that a huge piece costs n log n, not n².
const scanLimit = 48

const noMerge = int32(1<<31 - 1)

// mergeScan merges the lowest-ranked adjacent pair, leftmost first, until none is left.
func (m *bpe) mergeScan(ids []int, word string) []int {
	var symBuf [scanLimit]int32
	var rankBuf [scanLimit]int32
	n := len(word)
	sym := symBuf[:n]
	rank := rankBuf[:n-1]
	for i := 0; i < n; i++ {
		sym[i] = m.byteID[word[i]]
	}
	for i := 0; i < n-1; i++ {
		rank[i] = m.rankOf(sym[i], sym[i+1])
	}
	for {
		best := -1
		br := noMerge
		for i, r := range rank {
			if r < br {
				br, best = r, i
			}
		}
		if best < 0 {
			break
		}
		sym[best] = m.merges[pairKey(sym[best], sym[best+1])].newID
		copy(sym[best+1:], sym[best+2:])
		sym = sym[:len(sym)-1]
		copy(rank[best:], rank[best+1:])
		rank = rank[:len(rank)-1]
		if best > 0 {
			rank[best-1] = m.rankOf(sym[best-1], sym[best])
		}
		if best < len(rank) {
			rank[best] = m.rankOf(sym[best], sym[best+1])
		}
	}
	for _, s := range sym {
		ids = append(ids, int(s))
	}
	return ids
}

func (m *bpe) rankOf(a, b int32) int32 {
	if mg, ok := m.merges[pairKey(a, b)]; ok {
		return mg.rank
	}
	return noMerge
}

// mergeHeap does what mergeScan does with a priority queue of (rank, position) over a linked
// list of symbols; stale queue entries are recognised because a merged pair's new id changes.
func (m *bpe) mergeHeap(ids []int, word string) []int {
	n := len(word)
	type symbol struct {
		id         int32
		prev, next int32
		gone       bool
	}
	syms := make([]symbol, n)
	for i := 0; i < n; i++ {
		syms[i] = symbol{id: m.byteID[word[i]], prev: int32(i - 1), next: int32(i + 1)}
	}
	syms[n-1].next = -1
	q := make(mergeQueue, 0, n)
	for i := 0; i < n-1; i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			q.push(queued{rank: mg.rank, pos: int32(i), newID: mg.newID})
		}
	}
	for len(q) > 0 {
		top := q.pop()
		s := &syms[top.pos]
		if s.gone || s.next < 0 {
			continue
		}
		right := &syms[s.next]
		if mg, ok := m.merges[pairKey(s.id, right.id)]; !ok || mg.newID != top.newID {
			continue
		}
		s.id = top.newID
		right.gone = true
		s.next = right.next
		if s.next >= 0 {
			syms[s.next].prev = top.pos
		}
		if s.prev >= 0 {
			if mg, ok := m.merges[pairKey(syms[s.prev].id, s.id)]; ok {
				q.push(queued{rank: mg.rank, pos: s.prev, newID: mg.newID})
			}
		}
		if s.next >= 0 {
			if mg, ok := m.merges[pairKey(s.id, syms[s.next].id)]; ok {
				q.push(queued{rank: mg.rank, pos: top.pos, newID: mg.newID})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		ids = append(ids, int(syms[i].id))
	}
	return ids
}

type queued struct {
	rank, pos, newID int32
}

// mergeQueue is a binary min-heap ordered by rank, then position.
type mergeQueue []queued

func (q queued) less(o queued) bool {
	return q.rank < o.rank || (q.rank == o.rank && q.pos < o.pos)
}

func (q *mergeQueue) push(x queued) {
	*q = append(*q, x)
	h := *q
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *mergeQueue) pop() queued {
	h := *q
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && h[r].less(h[l]) {
			c = r
		}
		if !h[c].less(h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	*q = h
	return top
}

// wordCache remembers the ids of pieces already merged; it stops growing at cacheCapacity.
type wordCache struct {
	shards [cacheShards]cacheShard
}

const (
	cacheShards   = 32
	cacheCapacity = 1 << 16
	cacheMaxWord  = 256
)

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int
}

func (c *wordCache) init() {
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int)
	}
}

func (c *wordCache) shard(word string) *cacheShard {
	h := uint32(2166136261)
	for i := 0; i < len(word); i++ {
		h = (h ^ uint32(word[i])) * 16777619
	}
	return &c.shards[h%cacheShards]
}

func (c *wordCache) get(word string) ([]int, bool) {
	if len(word) > cacheMaxWord {
		return nil, false
	}
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.m[word]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int) {
	if len(word) > cacheMaxWord {
		return
	}
	s := c.shard(word)
	s.mu.Lock()
	if len(s.m) < cacheCapacity/cacheShards {
		s.m[word] = append([]int(nil), ids...)
	}
	s.mu.Unlock()
}
