package chatmsg

import (
	"errors"
	"io"
)

// ErrOverLimit is LimitReader's error once its reader has more than its
// bound.
var ErrOverLimit = errors.New("chatmsg: over the artifact limit")

// LimitReader reads at most N bytes of R and fails with ErrOverLimit once
// R has more, so that the dropzone drops the partial object; Over then
// reports it (the dropzone may wrap the error).
type LimitReader struct {
	R    io.Reader
	N    int64 // bytes left
	over bool
}

// Over reports whether R had more than the bound.
func (l *LimitReader) Over() bool { return l.over }

func (l *LimitReader) Read(p []byte) (int, error) {
	if l.N < 0 {
		l.over = true
		return 0, ErrOverLimit
	}
	if int64(len(p)) > l.N+1 {
		p = p[:l.N+1]
	}
	n, err := l.R.Read(p)
	l.N -= int64(n)
	if l.N < 0 {
		l.over = true
		return 0, ErrOverLimit
	}
	return n, err
}
