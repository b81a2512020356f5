// Package lru is a map that lets its least recently used entries go when their weight passes a
// budget: the tapes of round shapes, the graphs of launch runs and the vision rows of images.
package lru

import (
	"container/list"
	"iter"
)

// Map holds values by key within a budget of weight (a count where every weight is 1). Get and
// Put make an entry the most recently used; Peek does not.
type Map[K comparable, V any] struct {
	budget, weight int
	items          map[K]*list.Element
	order          list.List // of *entry[K, V], most recently used first
}

type entry[K comparable, V any] struct {
	key    K
	val    V
	weight int
}

// New is an empty map of the given budget.
func New[K comparable, V any](budget int) *Map[K, V] {
	return &Map[K, V]{budget: budget, items: map[K]*list.Element{}}
}

// Peek returns k's value, leaving the order as it is.
func (m *Map[K, V]) Peek(k K) (V, bool) {
	if e, ok := m.items[k]; ok {
		return e.Value.(*entry[K, V]).val, true
	}
	var zero V
	return zero, false
}

// Get returns k's value and makes it the most recently used.
func (m *Map[K, V]) Get(k K) (V, bool) {
	e, ok := m.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	m.order.MoveToFront(e)
	return e.Value.(*entry[K, V]).val, true
}

// Put keeps v, of the given weight, under k as the most recently used, and returns the values
// that went: k's earlier one, then the least recently used while the weight passes the budget
// (never v itself).
func (m *Map[K, V]) Put(k K, v V, weight int) []V {
	var gone []V
	if e, ok := m.items[k]; ok {
		gone = append(gone, m.remove(e))
	}
	m.items[k] = m.order.PushFront(&entry[K, V]{k, v, weight})
	m.weight += weight
	for m.weight > m.budget && m.order.Len() > 1 {
		gone = append(gone, m.remove(m.order.Back()))
	}
	return gone
}

// Remove takes k's value out.
func (m *Map[K, V]) Remove(k K) (V, bool) {
	if e, ok := m.items[k]; ok {
		return m.remove(e), true
	}
	var zero V
	return zero, false
}

func (m *Map[K, V]) remove(e *list.Element) V {
	en := m.order.Remove(e).(*entry[K, V])
	delete(m.items, en.key)
	m.weight -= en.weight
	return en.val
}

// Len is the number of entries.
func (m *Map[K, V]) Len() int { return len(m.items) }

// All yields every entry, most recently used first.
func (m *Map[K, V]) All() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for e := m.order.Front(); e != nil; e = e.Next() {
			en := e.Value.(*entry[K, V])
			if !yield(en.key, en.val) {
				return
			}
		}
	}
}

// Clear removes every entry.
func (m *Map[K, V]) Clear() {
	clear(m.items)
	m.order.Init()
	m.weight = 0
}
