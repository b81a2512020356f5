package lanes

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
)

// blockHash names a page's contents: the hash of every token before and in the page, image
// placeholder rows standing for their image's identity and row, so equal hashes mean equal KV rows.
type blockHash [32]byte

// pagePool is the fixed pool of KV pages and the prompt cache that keeps full pages of finished
// or running sequences for later requests with the same prefix.
type pagePool struct {
	free    []int32         // pages nobody uses and the cache does not hold
	refs    []int32         // sequences using each page
	cached  []*list.Element // the cache entry holding each page, or nil
	entries map[blockHash]*list.Element
	lru     *list.List // *cacheEntry, most recently used in front
	limit   int        // most pages only the cache may hold; 0: no limit but the pool
}

type cacheEntry struct {
	hash blockHash
	page int32
}

func newPagePool(pages, cacheLimit int) *pagePool {
	p := &pagePool{
		refs:    make([]int32, pages),
		cached:  make([]*list.Element, pages),
		entries: map[blockHash]*list.Element{},
		lru:     list.New(),
		limit:   cacheLimit,
	}
	for i := pages - 1; i >= 0; i-- {
		p.free = append(p.free, int32(i))
	}
	return p
}

// alloc takes a page for one sequence, evicting the least recently used unreferenced cached page
// when the free list is empty.
func (p *pagePool) alloc() (int32, bool) {
	if len(p.free) == 0 && !p.evictOne() {
		return -1, false
	}
	pg := p.free[len(p.free)-1]
	p.free = p.free[:len(p.free)-1]
	p.refs[pg] = 1
	return pg, true
}

// release drops one sequence's use of a page.
func (p *pagePool) release(pg int32) {
	p.refs[pg]--
	if p.refs[pg] == 0 && p.cached[pg] == nil {
		p.free = append(p.free, pg)
	}
}

// evictOne frees the least recently used cached page no sequence uses.
func (p *pagePool) evictOne() bool {
	for e := p.lru.Back(); e != nil; e = e.Prev() {
		ce := e.Value.(*cacheEntry)
		if p.refs[ce.page] == 0 {
			p.drop(e)
			return true
		}
	}
	return false
}

func (p *pagePool) drop(e *list.Element) {
	ce := e.Value.(*cacheEntry)
	p.lru.Remove(e)
	delete(p.entries, ce.hash)
	p.cached[ce.page] = nil
	if p.refs[ce.page] == 0 {
		p.free = append(p.free, ce.page)
	}
}

// lookup returns the cached pages of the longest run of leading hashes, taking a reference on each.
func (p *pagePool) lookup(hashes []blockHash) []int32 {
	var pages []int32
	var hit []*list.Element
	for _, h := range hashes {
		e, ok := p.entries[h]
		if !ok {
			break
		}
		hit = append(hit, e)
		pages = append(pages, e.Value.(*cacheEntry).page)
	}
	// deeper pages are touched first so that a prefix's first pages are evicted last
	for i := len(hit) - 1; i >= 0; i-- {
		p.lru.MoveToFront(hit[i])
	}
	for _, pg := range pages {
		p.refs[pg]++
	}
	return pages
}

// publish offers a sequence's full page to the cache under its hash.
func (p *pagePool) publish(h blockHash, pg int32) {
	if e, ok := p.entries[h]; ok {
		p.lru.MoveToFront(e)
		return
	}
	if p.cached[pg] != nil {
		return
	}
	e := p.lru.PushFront(&cacheEntry{hash: h, page: pg})
	p.entries[h] = e
	p.cached[pg] = e
}

// touch marks a prefix's pages used now, deepest first, so that its first pages are evicted last.
func (p *pagePool) touch(hashes []blockHash) {
	for i := len(hashes) - 1; i >= 0; i-- {
		if e, ok := p.entries[hashes[i]]; ok {
			p.lru.MoveToFront(e)
		}
	}
}

// trim evicts least recently used pages that only the cache holds until at most limit remain.
func (p *pagePool) trim() {
	if p.limit <= 0 {
		return
	}
	idle := 0
	for e := p.lru.Front(); e != nil; e = e.Next() {
		if p.refs[e.Value.(*cacheEntry).page] == 0 {
			idle++
		}
	}
	for ; idle > p.limit && p.evictOne(); idle-- {
	}
}

// used counts pages held by sequences; cachedOnly counts pages only the cache holds.
func (p *pagePool) counts() (used, cachedOnly int) {
	for pg, r := range p.refs {
		if r > 0 {
			used++
		} else if p.cached[pg] != nil {
			cachedOnly++
		}
	}
	return used, cachedOnly
}

// extendHashes chains a hash over each full page of ids until hs covers blocks pages; imageKey
// gives the identity of the row at index i when it is an image row ("" for text rows).
func extendHashes(hs []blockHash, ids []int32, pageSize, blocks int, imageKey func(i int) string) []blockHash {
	var prev blockHash
	if len(hs) > 0 {
		prev = hs[len(hs)-1]
	}
	var buf [4]byte
	for b := len(hs); b < blocks; b++ {
		h := sha256.New()
		h.Write(prev[:])
		for i := b * pageSize; i < (b+1)*pageSize; i++ {
			binary.LittleEndian.PutUint32(buf[:], uint32(ids[i]))
			h.Write(buf[:])
			if k := imageKey(i); k != "" {
				h.Write([]byte(k))
			}
		}
		copy(prev[:], h.Sum(nil))
		hs = append(hs, prev)
	}
	return hs
}
