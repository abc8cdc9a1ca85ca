package freelist

import "testing"

// A value put is got again, up to the list's capacity; past it, Get makes
// a new one and Put lets the extra go.
func TestList(t *testing.T) {
	l := make(List[*int], 2)
	made := 0
	mk := func() *int { made++; return new(int) }
	a, b, c := l.Get(mk), l.Get(mk), l.Get(mk)
	if made != 3 {
		t.Fatalf("made %d from an empty list, want 3", made)
	}
	l.Put(a)
	l.Put(b)
	l.Put(c) // full: dropped
	got := map[*int]bool{l.Get(mk): true, l.Get(mk): true}
	if !got[a] || !got[b] || made != 3 {
		t.Errorf("got back %v (made %d), want a and b and nothing new", got, made)
	}
	if l.Get(mk); made != 4 {
		t.Errorf("made %d after the list ran out, want 4", made)
	}
}
