// Package freelist keeps values (buffers, scratch) from one use to the
// next. Unlike a sync.Pool's, they are not dropped at a collection, which
// comes every few pages of a listing: a buffer grown again each time was
// most of what a listing allocated.
package freelist

// List is a free list of up to cap(l) values; make one with make.
type List[T any] chan T

// Get is a value kept, or a new one.
func (l List[T]) Get(make func() T) T {
	select {
	case v := <-l:
		return v
	default:
		return make()
	}
}

// Put keeps v, unless the list is full.
func (l List[T]) Put(v T) {
	select {
	case l <- v:
	default:
	}
}
