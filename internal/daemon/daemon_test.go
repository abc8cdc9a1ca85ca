package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/config"
	"github.com/monoco/courier/internal/testutil"
)

// The serve's log rotates by size, keeps max_files rotated files, and a
// descriptor that was the log file (serve's stderr, for panics) follows
// it into the new file.
func TestLogFileRotates(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "logs", "courier.log")
	std, err := openServiceLog(path)
	if err != nil {
		t.Fatal(err)
	}
	defer std.Close()
	stdfd := int(std.Fd())
	w, err := OpenLogFile(path, config.Log{MaxSizeMB: 1, MaxFiles: 2}, stdfd)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if len(w.std) != 1 {
		t.Fatalf("the descriptor on the log file is not kept on it: %v", w.std)
	}
	line := strings.Repeat("x", 1023) + "\n"
	write := func(n int) {
		for range n {
			if _, err := w.Write([]byte(line)); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(1500) // 1.5 MiB: one rotation
	if got := rotatedLogs(path); len(got) != 1 {
		t.Fatalf("after 1.5 MiB, rotated files %v", got)
	}
	fmt.Fprintf(std, "panic: marker\n")
	cur, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(cur), "panic: marker\n") {
		t.Errorf("what stderr writes after a rotation is not in the current log")
	}
	if fi, _ := os.Stat(path); fi.Size() > 1<<20 {
		t.Errorf("current log is %d bytes, over the 1 MiB bound", fi.Size())
	}
	for range 4 { // four more rotations; lumberjack removes the oldest in the background
		write(1100)
	}
	testutil.WaitFor(t, 10*time.Second, "at most 2 rotated files kept", func() bool { return len(rotatedLogs(path)) == 2 })
}

// unitOfCgroup finds the service unit a process runs in, and no unit for
// a process in a login session or a terminal's scope.
func TestUnitOfCgroup(t *testing.T) {
	for _, c := range []struct {
		cg   string
		want Unit
		ok   bool
	}{
		{"0::/system.slice/courier.service\n", Unit{name: "courier.service"}, true},
		{"0::/system.slice/system-courier.slice/courier@work.service\n", Unit{name: "courier@work.service"}, true},
		{"0::/user.slice/user-1000.slice/user@1000.service/app.slice/courier.service\n", Unit{name: "courier.service", user: true}, true},
		{"0::/user.slice/user-1000.slice/session-3.scope\n", Unit{}, false},
		{"0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-gnome-terminal-123.scope\n", Unit{}, false},
		{"0::/user.slice/user-1000.slice/user@1000.service/init.scope\n", Unit{}, false},
		{"0::/\n", Unit{}, false},
		{"12:pids:/system.slice/courier.service\n1:name=systemd:/system.slice/courier.service\n", Unit{name: "courier.service"}, true},
		{"12:pids:/system.slice/courier.service\n", Unit{}, false},
	} {
		got, ok := unitOfCgroup(c.cg)
		if got != c.want || ok != c.ok {
			t.Errorf("unitOfCgroup(%q) = %+v %v, want %+v %v", c.cg, got, ok, c.want, c.ok)
		}
	}
}
