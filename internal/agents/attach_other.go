//go:build !linux

package agents

import "os"

// pseudoFS is Linux's check; elsewhere the path checks stand alone.
func pseudoFS(*os.File) string { return "" }
