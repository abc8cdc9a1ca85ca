package main

import (
	"strings"
	"testing"
)

func TestWebNeedsTheService(t *testing.T) {
	if viaService {
		t.Skip("runs without a service")
	}
	ws := newWorkspace(t)
	_, e, code := cli(t, ws, "", "web")
	if code != 3 || !strings.Contains(e, "courier web needs the service running") {
		t.Fatalf("courier web without the service: %d %s", code, e)
	}
}

func TestBrowserHost(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9000": "127.0.0.1:9000", ":9000": "localhost:9000", "0.0.0.0:9000": "localhost:9000",
		"[::]:9000": "localhost:9000", "[::1]:9000": "[::1]:9000", "example.com:80": "example.com:80",
	} {
		if got := browserHost(in); got != want {
			t.Errorf("browserHost(%q) = %q, want %q", in, got, want)
		}
	}
}
