package testutil

import (
	"io"
	"os"
	"testing"
)

// CopyFile copies src to dst, made with mode: a binary another user is to
// run, say.
func CopyFile(tb testing.TB, src, dst string, mode os.FileMode) {
	tb.Helper()
	in, err := os.Open(src)
	if err != nil {
		tb.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		tb.Fatal(err)
	}
	if err := out.Close(); err != nil {
		tb.Fatal(err)
	}
}
