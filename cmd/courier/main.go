// Command courier is Courier's one binary: the service (`courier serve`)
// and the command line agents use to read and answer their mail (list,
// read, claim, done, fail, send, thread, context).
//
// Invoked as `monoco` (a symlink or a copy so named), it also answers
// `monoco courier ...` and `monoco mailbox ...`, so agents written against
// the upstream documentation work unchanged.
//
// Exit codes: 0 ok; 1 not found; 2 claim conflict; 3 service needed but not
// running; 4 timeout; 64 usage; 65 invalid input (a draft, a file); 66 a
// file that cannot be read; 69 a service Courier needs is unavailable; 70
// internal error; 73 cannot create; 74 I/O error; 77 the service runs but
// this user may not use its socket; 78 bad configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/monoco/courier/internal/fault"
)

func main() {
	// COURIER_CPUPROFILE=file writes a CPU profile of the whole run, for
	// looking into performance (go tool pprof courier file).
	if p := os.Getenv("COURIER_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			code := run(os.Args, os.Stdin, os.Stdout, os.Stderr)
			pprof.StopCPUProfile()
			f.Close()
			os.Exit(code)
		}
	}
	// COURIER_MEMPROFILE=file writes a heap profile at the end of the run,
	// every allocation sampled (go tool pprof -sample_index=alloc_space).
	if p := os.Getenv("COURIER_MEMPROFILE"); p != "" {
		runtime.MemProfileRate = 4096
		code := run(os.Args, os.Stdin, os.Stdout, os.Stderr)
		if f, err := os.Create(p); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		os.Exit(code)
	}
	os.Exit(run(os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	name := strings.TrimSuffix(filepath.Base(args[0]), ".exe")
	rest := args[1:]
	if name == "monoco" {
		if len(rest) == 0 || (rest[0] != "courier" && rest[0] != "mailbox") {
			if len(rest) > 0 && (rest[0] == "-h" || rest[0] == "--help" || rest[0] == "help") {
				fmt.Fprintln(stdout, "usage: monoco courier|mailbox COMMAND ... (see `monoco mailbox --help`)")
				return 0
			}
			fmt.Fprintln(stderr, "monoco: this binary is Courier; use `monoco courier ...` or `monoco mailbox ...`")
			return fault.Usage.ExitCode()
		}
		name = "monoco " + rest[0]
		rest = rest[1:]
	} else if len(rest) > 0 && (rest[0] == "mailbox" || rest[0] == "courier") {
		// `courier mailbox list` reads like the upstream docs too.
		rest = rest[1:]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	app := &app{stdin: stdin, stdout: stdout, stderr: stderr}
	root := app.rootCommand(name)
	root.SetArgs(rest)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	app.close()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintf(stderr, "%s%s\n", errPrefix, strings.TrimSpace(err.Error()))
	return exitCode(err)
}
