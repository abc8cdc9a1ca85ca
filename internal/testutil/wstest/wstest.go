// Package wstest makes the temp workspace tests of adapters and the
// engines stand on: a mailbox, its dropzone and, when asked, a running
// ingest pipeline, all closed when the test ends. It is imported by tests
// only (never by mailbox, dropzone or ingest themselves, whose own tests
// would then import them twice).
package wstest

import (
	"context"
	"testing"
	"time"

	"github.com/monoco/courier/dropzone"
	"github.com/monoco/courier/ingest"
	"github.com/monoco/courier/mailbox"
)

// Workspace is a temp workspace.
type Workspace struct {
	Root string
	MB   *mailbox.Mailbox
	DZ   *dropzone.Store
	// Pipe is the ingest pipeline, started; nil from Mailbox.
	Pipe *ingest.Pipeline
}

// Mailbox makes a workspace with its mailbox and dropzone open.
func Mailbox(tb testing.TB) *Workspace {
	tb.Helper()
	root := tb.TempDir()
	if err := mailbox.Init(root); err != nil {
		tb.Fatal(err)
	}
	mb, err := mailbox.Open(root, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { mb.Close() })
	dz, err := dropzone.Open(mb.Dropzone(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { dz.Close() })
	return &Workspace{Root: root, MB: mb, DZ: dz}
}

// New makes a workspace with a started ingest pipeline (options opts, nil
// for the defaults). Cleanups run last in, first out: sources a test stops
// in cleanups it registers later are gone before the pipeline stops.
func New(tb testing.TB, opts *ingest.Options) *Workspace {
	tb.Helper()
	w := Mailbox(tb)
	w.Pipe = ingest.New(w.MB, opts)
	if err := w.Pipe.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		w.Pipe.Stop(ctx)
	})
	return w
}
