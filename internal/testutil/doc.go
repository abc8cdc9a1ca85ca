// Package testutil holds helpers and fakes shared by Courier's tests. It is
// imported by _test.go files only, never by production code.
package testutil
