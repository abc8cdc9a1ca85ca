package agents

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/monoco/courier/internal/config"
)

// Where a draft's artifact `path` may point. A draft is text an agent
// wrote, and an agent can be talked into anything by the mail it reads: a
// path is the one field of a draft that reads from the machine, and what
// it names is mailed out. So `courier send` copies a file only from
// beneath the workspace or a folder of courier.outbound.attach_roots,
// opened through an os.Root (which refuses symbolic links and ".." that
// lead out of it), never from /proc, /sys or /dev, never from the
// workspace's .monoco/ (config, database, mailbox), and, unless
// courier.outbound.attach_hidden says otherwise, never a hidden file or
// folder (.env, .git, .ssh). The file that passed these checks is the one
// copied: it stays open from the check to the dropzone.

// systemDirs hold the kernel's and the devices' files: /proc/self/environ
// holds the process's secrets. Refused whatever the roots say.
var systemDirs = []string{"/proc", "/sys", "/dev"}

// attachPolicy decides which local files a draft may attach.
type attachPolicy struct {
	roots  []string // absolute and clean; the workspace is one
	hidden bool     // hidden files and folders allowed
	monoco string   // the workspace's .monoco/, never attached
}

// newAttachPolicy builds the policy of the config of the workspace at
// root (its attach_roots relative to the current folder).
func newAttachPolicy(root string, cfg *config.Config) (*attachPolicy, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	p := &attachPolicy{roots: []string{filepath.Clean(root)}, hidden: cfg.Courier.Outbound.AttachHidden,
		monoco: filepath.Join(root, ".monoco")}
	for _, r := range cfg.AttachRootDirs(cwd) {
		abs, err := filepath.Abs(r)
		if err != nil {
			return nil, err
		}
		p.roots = append(p.roots, abs)
	}
	return p, nil
}

// attachedFile is a file that passed the policy, open for reading.
type attachedFile struct {
	*os.File
	info fs.FileInfo
	abs  string // the path it was asked for, made absolute and clean
}

// open finds the file a draft names (absolute, or relative to base, the
// draft's folder), checks it against the policy and returns it open. Its
// error says what is wrong with the path and which setting would allow it;
// a file that does not exist wraps fs.ErrNotExist.
func (p *attachPolicy) open(name, base string) (*attachedFile, error) {
	abs := name
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(base, abs)
	}
	abs, err := filepath.Abs(abs) // also cleans it
	if err != nil {
		return nil, err
	}
	shown := name
	if filepath.Clean(name) != abs {
		shown = fmt.Sprintf("%s (%s)", name, abs)
	}
	if sys := underSystemDir(abs); sys != "" {
		return nil, fmt.Errorf("%s is under %s, whose files (process environments, memory, devices) are never attached", shown, sys)
	}
	var roots []string
	for _, r := range p.roots {
		if within(r, abs) {
			roots = append(roots, r)
		}
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("%s is outside the workspace %s and the folders of courier.outbound.attach_roots; "+
			"copy it into the workspace, or add its folder to courier.outbound.attach_roots", shown, p.roots[0])
	}
	// The narrowest root first: its rules (what is hidden beneath it) are
	// the ones its owner meant; a wider root may still take a path that
	// the narrower one refuses (a link from the workspace into a root
	// beside it).
	sort.SliceStable(roots, func(i, j int) bool { return len(roots[i]) > len(roots[j]) })
	var first error
	for _, r := range roots {
		f, err := p.openIn(r, abs, shown)
		if err == nil {
			return f, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// openIn opens abs through an os.Root of root and checks what it opened.
func (p *attachPolicy) openIn(root, abs, shown string) (*attachedFile, error) {
	rel, err := filepath.Rel(root, abs)
	if err != nil {
		return nil, err
	}
	if err := p.checkNames(root, abs, rel, shown); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("cannot open the folder %s that would hold %s: %v", root, shown, errors.Unwrap(err))
	}
	defer r.Close()
	// O_NONBLOCK: opening a named pipe would otherwise wait for a writer,
	// forever. It changes nothing for the regular files accepted below.
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("cannot read %s: %w", shown, fs.ErrNotExist)
		}
		if real, rerr := filepath.EvalSymlinks(abs); rerr == nil && real != abs {
			switch sys := underSystemDir(real); {
			case sys != "":
				return nil, fmt.Errorf("%s is a link to %s, under %s, whose files are never attached", shown, real, sys)
			case !within(realPath(root), real):
				return nil, fmt.Errorf("%s leads through a symbolic link to %s, outside %s; links may not leave the folder they are in", shown, real, root)
			default:
				// os.Root follows only relative links: an absolute target
				// is taken as leaving, wherever it points.
				return nil, fmt.Errorf("%s leads through a symbolic link with an absolute target (to %s); only relative links are followed: make it relative", shown, real)
			}
		}
		return nil, fmt.Errorf("cannot read %s: %v", shown, errors.Unwrap(err))
	}
	af, err := p.checkOpen(f, root, abs, shown)
	if err != nil {
		f.Close()
		return nil, err
	}
	return af, nil
}

// checkNames refuses, by the path's own names, what is in .monoco/ or
// hidden beneath root.
func (p *attachPolicy) checkNames(root, abs, rel, shown string) error {
	if within(p.monoco, abs) || within(realPath(p.monoco), abs) {
		return fmt.Errorf("%s is in the workspace's .monoco/ (its config, database and mailbox), which is never attached; "+
			"attach a dropzone object by its sha256: id instead", shown)
	}
	if p.hidden || rel == "." {
		return nil
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if strings.HasPrefix(part, ".") {
			return fmt.Errorf("%s is hidden (%q starts with \".\"): hidden files and folders (.env, .git, .ssh, ...) "+
				"are not attached unless courier.outbound.attach_hidden is true", shown, part)
		}
	}
	return nil
}

// checkOpen checks the file actually opened: a regular file, not on the
// kernel's pseudo-filesystems, and, where the path went through links
// that stay in the root, a target that the name rules allow too (a link
// notes.txt -> .env in the workspace is refused like .env).
func (p *attachPolicy) checkOpen(f *os.File, root, abs, shown string) (*attachedFile, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", shown, errors.Unwrap(err))
	}
	switch {
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a file", shown)
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s is not a regular file (%s)", shown, kindOf(fi.Mode()))
	}
	if fsName := pseudoFS(f); fsName != "" {
		return nil, fmt.Errorf("%s is on %s, whose files are never attached", shown, fsName)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %v", shown, errors.Unwrap(err))
	}
	// The path as the links resolve it must name the very file opened:
	// otherwise it was swapped between the two, and the checks below would
	// be about another file.
	if rfi, err := os.Stat(real); err != nil || !os.SameFile(fi, rfi) {
		return nil, fmt.Errorf("%s changed while it was being opened; try again", shown)
	}
	if real != abs {
		if sys := underSystemDir(real); sys != "" {
			return nil, fmt.Errorf("%s is a link to %s, under %s, whose files are never attached", shown, real, sys)
		}
		rroot := realPath(root)
		rel, err := filepath.Rel(rroot, real)
		if err != nil || !within(rroot, real) {
			return nil, fmt.Errorf("%s leads through a symbolic link to %s, outside %s; links may not leave the folder they are in", shown, real, root)
		}
		if err := p.checkNames(rroot, real, rel, fmt.Sprintf("%s, a link to %s,", shown, real)); err != nil {
			return nil, err
		}
	}
	return &attachedFile{File: f, info: fi, abs: abs}, nil
}

// within reports whether path is dir or beneath it (both clean and
// absolute).
func within(dir, path string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+string(filepath.Separator))
}

func underSystemDir(abs string) string {
	for _, d := range systemDirs {
		if within(d, abs) {
			return d
		}
	}
	return ""
}

// realPath is dir with its links resolved, or dir itself when it cannot be
// (it does not exist: then nothing beneath it opens either).
func realPath(dir string) string {
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return dir
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}
