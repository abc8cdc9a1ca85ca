package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/notify"
)

// hookReport is the hooks and the listener of a /health or status JSON.
type hookReport struct {
	Listen string                  `json:"listen"`
	Hooks  map[string]notify.State `json:"hooks"`
}

// Each hook's backlog, failing calls, last error and dead letters show
// in `courier status` (text and JSON), /health and /metrics while the
// service runs, and in `courier status` once it has stopped; a stopped
// service's status names no HTTP address (issue 19, item 5).
func TestHooksVisible(t *testing.T) {
	sink := testutil.StartSMTPSink(t, nil)
	ws, web := outboundWS(t, sink, "", `  notify:
    - {name: ok, exec: [/bin/true], direction: outbound}
    - {name: failing, exec: [/bin/false], direction: outbound, backoff: 1h, max_attempts: 5}
    - {name: broken, exec: [/nonexistent/hook], direction: outbound}
`)
	s := startServe(t, ws, web)
	sendReply(t, ws, "Report")
	var rep hookReport
	testutil.WaitFor(t, 20*time.Second, "ok's call run, a failing and a dead call on /health", func() bool {
		rep = hookReport{}
		resp, err := http.Get(s.Health)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&rep)
		ok, there := rep.Hooks["ok"]
		return there && ok.Backlog == 0 && rep.Hooks["failing"].Failing == 1 && rep.Hooks["broken"].Dead == 1
	})
	check := func(where string, rep hookReport) {
		t.Helper()
		ok, f, b := rep.Hooks["ok"], rep.Hooks["failing"], rep.Hooks["broken"]
		if _, there := rep.Hooks["ok"]; !there || ok.Backlog != 0 || ok.Failing != 0 || ok.Dead != 0 || ok.LastError != "" {
			t.Errorf("%s: ok = %+v", where, ok)
		}
		if f.Backlog != 1 || f.Failing != 1 || f.Dead != 0 || f.LastError != "false: exit status 1" || f.RetryAt == nil || time.Until(*f.RetryAt) < 5*time.Minute {
			t.Errorf("%s: failing = %+v", where, f)
		}
		if b.Backlog != 0 || b.Dead != 1 || !strings.Contains(b.LastError, "/nonexistent/hook") {
			t.Errorf("%s: broken = %+v", where, b)
		}
	}
	check("/health", rep)
	resp, err := http.Get("http://" + web + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{`courier_hook_backlog{hook="failing"} 1`, `courier_hook_failing{hook="failing"} 1`, `courier_hook_dead{hook="failing"} 0`,
		`courier_hook_dead{hook="broken"} 1`, `courier_hook_backlog{hook="ok"} 0`} {
		if !strings.Contains(string(metrics), m+"\n") {
			t.Errorf("/metrics lacks %s", m)
		}
	}
	statusBoth := func(live bool) {
		t.Helper()
		where := map[bool]string{true: "status (running)", false: "status (stopped)"}[live]
		out, _, _ := cli(t, ws, "", "status", "--format", "json")
		var rep hookReport
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatalf("%s --format json: %v\n%s", where, err, out)
		}
		check(where+" --format json", rep)
		if (rep.Listen != "") != live {
			t.Errorf("%s --format json: listen %q", where, rep.Listen)
		}
		text, _, _ := cli(t, ws, "", "status")
		for _, want := range []string{"Hooks:     ok: backlog 0, failing 0\n", "Hooks:     failing: backlog 1, failing 1 (next try ", "; last error: false: exit status 1\n",
			"Hooks:     broken: 1 call(s) set aside in its dead letters (`courier hooks retry broken` runs them again); backlog 0, failing 0; last error: "} {
			if !strings.Contains(text, want) {
				t.Errorf("%s lacks %q:\n%s", where, want, text)
			}
		}
		if strings.Contains(text, "HTTP:") != live {
			t.Errorf("%s: HTTP line %v:\n%s", where, !live, text)
		}
	}
	statusBoth(true)
	s.Stop(t)
	statusBoth(false)
}

// A stopped service's status claims no listener: no HTTP line, no
// "listen" in its JSON (issue 19, smaller findings).
func TestStatusStoppedNamesNoListener(t *testing.T) {
	ws := newWorkspace(t)
	writeConfig(t, ws, "courier:\n  http: {listen: 127.0.0.1:1}\n")
	text, _, code := cli(t, ws, "", "status")
	if code != 3 || strings.Contains(text, "HTTP:") || strings.Contains(text, "127.0.0.1:1") {
		t.Errorf("status, stopped: exit %d\n%s", code, text)
	}
	out, _, _ := cli(t, ws, "", "status", "--format", "json")
	if strings.Contains(out, `"listen"`) {
		t.Errorf("status --format json, stopped:\n%s", out)
	}
}
