package daemon

// The log of a service started with `courier start`: written by serve
// through lumberjack, which rotates it by size (courier.log.max_size_mb)
// and keeps courier.log.max_files rotated files; read by `courier logs`,
// which prints the last lines (through rotations) and follows the file
// across them, as `tail -F` does.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
	"gopkg.in/natefinch/lumberjack.v2"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/fault"
)

// LogFile is the service's rotating log. When serve's stdout and stderr
// are the log file (as `courier start` makes them: a panic, or an error
// before the logger exists, lands there), they are pointed at the new file
// after each rotation, so that they do not go on writing to a rotated one.
type LogFile struct {
	mu    sync.Mutex
	lj    *lumberjack.Logger
	path  string
	ino   uint64
	std   []int // the descriptors to keep on the current file
	dupTo func(oldfd, newfd int) error
}

// OpenLogFile opens the rotating log at path. fds are the descriptors
// (stdout, stderr) to keep on the current file, among those that are the
// log file now.
func OpenLogFile(path string, l config.Log, fds ...int) (*LogFile, error) {
	f, err := openServiceLog(path)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	err = unix.Fstat(int(f.Fd()), &st)
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	w := &LogFile{
		lj:   &lumberjack.Logger{Filename: path, MaxSize: l.MaxSizeMB, MaxBackups: l.MaxFiles},
		path: path, ino: st.Ino,
		dupTo: func(oldfd, newfd int) error { return unix.Dup3(oldfd, newfd, 0) },
	}
	for _, fd := range fds {
		var fst unix.Stat_t
		if unix.Fstat(fd, &fst) == nil && fst.Dev == st.Dev && fst.Ino == st.Ino {
			w.std = append(w.std, fd)
		}
	}
	return w, nil
}

func (w *LogFile) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.lj.Write(p)
	if len(w.std) > 0 {
		w.followRotation()
	}
	return n, err
}

// followRotation points the standard descriptors at the log file if
// lumberjack has made a new one.
func (w *LogFile) followRotation() {
	var st unix.Stat_t
	if unix.Stat(w.path, &st) != nil || st.Ino == w.ino {
		return
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	defer f.Close()
	for _, fd := range w.std {
		w.dupTo(int(f.Fd()), fd)
	}
	w.ino = st.Ino
}

// Close closes the file.
func (w *LogFile) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lj.Close()
}

// Logs prints the last n lines of the service's log (courier.log.file),
// going back into the rotated files when the current one is shorter, and
// with follow what is written to it afterwards, until ctx ends. Under
// systemd it runs journalctl.
func (d *Daemon) Logs(ctx context.Context, n int, follow bool) error {
	if u, ok, err := d.SystemdUnit(ctx); err != nil {
		return err
	} else if ok {
		return d.journalctl(ctx, u, n, follow)
	}
	return d.logs(ctx, d.Config.LogPath(d.Root), n, follow)
}

// logs prints the last n lines of the log at path and, with follow, what
// is written to it afterwards.
func (d *Daemon) logs(ctx context.Context, path string, n int, follow bool) error {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return fault.Wrap(fault.NoInput, fmt.Errorf("no log at %s: the service writes it when `courier start` runs it (under systemd: journalctl -u courier)", path))
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if err := printLast(d.Stdout, f, rotatedLogs(path), n); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	return followLog(ctx, d.Stdout, path, f)
}

// rotatedLogs returns the rotated files of the log at path, oldest first
// (lumberjack names them <name>-<UTC time>.<ext>, in an order that sorts).
func rotatedLogs(path string) []string {
	ext := filepath.Ext(path)
	prefix := strings.TrimSuffix(filepath.Base(path), ext) + "-"
	ents, _ := os.ReadDir(filepath.Dir(path))
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasPrefix(e.Name(), prefix) && strings.HasSuffix(e.Name(), ext) {
			out = append(out, filepath.Join(filepath.Dir(path), e.Name()))
		}
	}
	slices.Sort(out)
	return out
}

// printLast copies the last n lines of the rotated files and then cur to
// w, and leaves cur at its end. It reads backwards from the end counting
// line breaks, then copies forwards: memory stays bounded whatever n and
// the lines' length.
func printLast(w io.Writer, cur *os.File, rotated []string, n int) error {
	type part struct {
		f    *os.File
		from int64
	}
	var parts []part
	need := n
	f := cur
	for i := len(rotated); ; i-- {
		from, found, err := lastLinesStart(f, need)
		if err != nil {
			return err
		}
		parts = append(parts, part{f, from})
		need -= found
		if need <= 0 || i == 0 {
			break
		}
		if f, err = os.OpenFile(rotated[i-1], os.O_RDONLY|unix.O_NOFOLLOW, 0); err != nil {
			break
		}
		defer f.Close()
	}
	for i := len(parts) - 1; i >= 0; i-- {
		p := parts[i]
		if _, err := p.f.Seek(p.from, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(w, p.f); err != nil {
			return err
		}
	}
	return nil
}

// lastLinesStart returns the offset in f where its last n lines start, and
// how many lines there are from there (fewer than n when the file is
// shorter). A last line without its line break counts as a line.
func lastLinesStart(f *os.File, n int) (int64, int, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	end := fi.Size()
	if n == 0 || end == 0 {
		return end, 0, nil
	}
	buf := make([]byte, 64*1024)
	pos, found := end, 0
	// The break ending the last line does not start a line.
	skipLast := true
	for pos > 0 {
		size := min(int64(len(buf)), pos)
		pos -= size
		if _, err := f.ReadAt(buf[:size], pos); err != nil && err != io.EOF {
			return 0, 0, err
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' {
				skipLast = false
				continue
			}
			if skipLast {
				skipLast = false
				continue
			}
			found++
			if found == n {
				return pos + i + 1, found, nil
			}
		}
	}
	return 0, found + 1, nil
}

// followLog copies what is appended to the log to w until ctx ends. When
// the log is rotated (its name now names a new file), the rest of the old
// file is copied, then the new one from its start; a file truncated in
// place is read again from its start. fsnotify wakes it; a tick of a
// second catches what a watch cannot see (a file system without inotify).
func followLog(ctx context.Context, w io.Writer, path string, f *os.File) error {
	watcher, err := fsnotify.NewWatcher()
	var events chan fsnotify.Event
	if err == nil {
		defer watcher.Close()
		if watcher.Add(filepath.Dir(path)) == nil {
			events = watcher.Events
		}
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	defer func() { f.Close() }() // the file followed last; the caller closes the first
	for {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		var cur, now unix.Stat_t
		if unix.Fstat(int(f.Fd()), &cur) == nil {
			switch err := unix.Stat(path, &now); {
			case err == nil && (now.Ino != cur.Ino || now.Dev != cur.Dev):
				nf, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
				if err == nil {
					io.Copy(w, f) // what the old file got after the copy above
					f.Close()
					f = nf
					continue
				}
			case err == nil:
				if off, _ := f.Seek(0, io.SeekCurrent); now.Size < off {
					f.Seek(0, io.SeekStart)
					continue
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-events:
			if !ok {
				events = nil
			}
		case <-tick.C:
		}
	}
}
