package agents

import (
	"os"

	"golang.org/x/sys/unix"
)

// pseudoFS names the kernel pseudo-filesystem f is on, or "". The path
// checks refuse /proc and /sys by name; this catches them mounted
// elsewhere too (a container's bind mount, a chroot's /proc).
func pseudoFS(f *os.File) string {
	var st unix.Statfs_t
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstatfs(int(fd), &st) }); err != nil || serr != nil {
		return ""
	}
	switch st.Type {
	case unix.PROC_SUPER_MAGIC:
		return "a proc filesystem"
	case unix.SYSFS_MAGIC:
		return "a sysfs filesystem"
	case unix.DEBUGFS_MAGIC, unix.TRACEFS_MAGIC, unix.SECURITYFS_MAGIC, unix.EFIVARFS_MAGIC:
		return "a kernel filesystem"
	}
	return ""
}
