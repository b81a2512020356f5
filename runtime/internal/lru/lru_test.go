package lru

import (
	"slices"
	"testing"
)

// TestEvictsLeastRecentlyUsed: within a count budget Put lets the least recently used go (Get
// refreshes an entry, Peek does not), and replacing a key returns its old value.
func TestEvictsLeastRecentlyUsed(t *testing.T) {
	m := New[int, string](2)
	if gone := m.Put(1, "a", 1); gone != nil {
		t.Fatalf("put into an empty map let %v go", gone)
	}
	m.Put(2, "b", 1)
	if v, ok := m.Get(1); !ok || v != "a" {
		t.Fatalf("get 1: %q %v", v, ok)
	}
	if v, ok := m.Peek(2); !ok || v != "b" {
		t.Fatalf("peek 2: %q %v", v, ok)
	}
	if gone := m.Put(3, "c", 1); !slices.Equal(gone, []string{"b"}) {
		t.Errorf("put 3 let %v go, want b (peeked, not used)", gone)
	}
	if gone := m.Put(1, "A", 1); !slices.Equal(gone, []string{"a"}) || m.Len() != 2 {
		t.Errorf("replacing 1 let %v go (len %d), want a", gone, m.Len())
	}
	var keys []int
	for k := range m.All() {
		keys = append(keys, k)
	}
	if !slices.Equal(keys, []int{1, 3}) {
		t.Errorf("keys by use %v, want 1 then 3", keys)
	}
	if v, ok := m.Remove(3); !ok || v != "c" || m.Len() != 1 {
		t.Errorf("remove 3: %q %v, len %d", v, ok, m.Len())
	}
	m.Clear()
	if _, ok := m.Get(1); ok || m.Len() != 0 {
		t.Error("an entry outlived Clear")
	}
}

// TestWeightBudget: entries weigh what Put says; the newest stays even alone over the budget.
func TestWeightBudget(t *testing.T) {
	m := New[string, int](10)
	m.Put("a", 1, 4)
	m.Put("b", 2, 4)
	if gone := m.Put("c", 3, 4); !slices.Equal(gone, []int{1}) {
		t.Errorf("12 of 10 let %v go, want the oldest", gone)
	}
	if gone := m.Put("d", 4, 20); !slices.Equal(gone, []int{2, 3}) || m.Len() != 1 {
		t.Errorf("an entry over the budget let %v go (len %d), want every other", gone, m.Len())
	}
}
