package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/smtp"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"

	"github.com/monoco/courier/internal/agents"
	"github.com/monoco/courier/internal/testutil"
	"github.com/monoco/courier/mailbox"
	"github.com/monoco/courier/schema"
)

// The web viewer in a real browser (headless Chromium driven by
// chromedp), on a real `courier serve`: log in through the URL `courier
// web` prints, see mail delivered before and mail arriving live, download
// an attachment byte for byte, open a hostile mail that runs nothing and
// loads nothing, retry and cancel a draft by clicking, and have a
// cross-site POST refused.

// findChromium returns the browser to drive, or skips.
func findChromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium on PATH (apt-get install chromium): the web viewer's browser tests are skipped")
	return ""
}

// newBrowser starts a headless browser; its context ends with the test.
func newBrowser(t *testing.T) context.Context {
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(findChromium(t)), chromedp.NoSandbox,
		chromedp.Flag("headless", true), chromedp.Flag("disable-gpu", true))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	if err := chromedp.Do(ctx); err != nil {
		t.Skipf("chromium does not start: %v", err)
	}
	return ctx
}

// browse runs steps with a timeout, failing t with what is on the page.
func browse(t *testing.T, ctx context.Context, timeout time.Duration, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(tctx, steps...); err != nil {
		html, _ := chromedp.Run(ctx, chromedp.OuterHTML("html"))
		t.Fatalf("%s: %v\npage:\n%s", what, err, html)
	}
}

// read runs an action that gives a value.
func read[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(tctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

func mimeMail(from, to, msgID, subject, ctype, body string) []byte {
	return fmt.Appendf(nil, "From: %s\r\nTo: %s\r\nSubject: %s\r\nMessage-ID: <%s>\r\nDate: %s\r\nMIME-Version: 1.0\r\n%s\r\n\r\n%s\r\n",
		from, to, subject, msgID, time.Now().Format(time.RFC1123Z), ctype, body)
}

func TestWebViewerInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	ws := newWorkspace(t)
	recv, web, deadSMTP := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	host, port, _ := strings.Cut(deadSMTP, ":")
	writeConfig(t, ws, fmt.Sprintf(`courier:
  http: {listen: %s}
  outbound: {rescan_interval: 1s}
  adapters:
    email:
      enabled: true
      receiver: {smtp: %s, addresses: [agent@corp.example]}
      accounts:
        - name: work
          addresses: [agent@corp.example]
          smtp: {host: %s, port: %s, tls: none}
`, web, recv, host, port))
	// A URL the hostile mail would hit if anything in it ran or loaded.
	var hits atomic.Int32
	watch := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer watch.Close()
	// A message whose Markdown itself is hostile (the email adapter's
	// conversion from HTML drops much of it already): the viewer's own
	// sanitiser is what stands.
	raw := testutil.Message(schema.Slack, "raw1", time.Now().Add(-time.Minute), "")
	raw.Session.Name = "Raw hostile"
	raw.Body = fmt.Sprintf("Hi <script>window.pwnedScript=1</script>\n\n<img src=x onerror=\"window.pwnedOnerror=1\">\n\n"+
		"[click me](javascript:window.pwnedLink=1) ![t](%[1]s/md.gif) <a href=\"javascript:window.pwnedLink=1\">raw</a>\n\n<script>fetch('%[1]s/block')</script>\n", watch.URL)
	seed(t, ws, testutil.Message(schema.Slack, "before1", time.Now().Add(-time.Hour), "Delivered before the login"), raw)
	s := startServe(t, ws, web)

	out, e, code := cli(t, ws, "", "web")
	if code != 0 || !strings.HasPrefix(out, "http://"+web+"/ui/?login=") {
		t.Fatalf("courier web: %d %q %s", code, out, e)
	}
	loginURL := strings.TrimSpace(out)
	browse(t, ctx, 20*time.Second, "log in", chromedp.Navigate(loginURL), chromedp.WaitVisible(`tr[data-id="slack_before1"]`))
	loc := read(t, ctx, "location", chromedp.Location())
	if loc != "http://"+web+"/ui/" {
		t.Errorf("after the login the browser is at %s, not /ui/", loc)
	}

	t.Run("live", func(t *testing.T) {
		start := time.Now()
		if err := sendMail(recv, "bob@example.com", "agent@corp.example", "live1@example.com", "Arrives live", "hello"); err != nil {
			t.Fatalf("%v\n%s", err, s.Log())
		}
		filed := time.Now()
		browse(t, ctx, 10*time.Second, "the new mail appears", chromedp.WaitVisible(`//td/a[contains(., "Arrives live")]`))
		if d := time.Since(filed); d > 3*time.Second {
			t.Errorf("the new mail appeared %v after it was filed (sent in %v), over 3 s", d, filed.Sub(start))
		}
	})

	t.Run("attachment", func(t *testing.T) {
		data := make([]byte, 20000)
		rand.Read(data)
		body := "--b1\r\nContent-Type: text/plain\r\n\r\nsee attached\r\n--b1\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=\"blob.bin\"\r\nContent-Transfer-Encoding: base64\r\n\r\n" +
			base64.StdEncoding.EncodeToString(data) + "\r\n--b1--"
		if err := smtp.SendMail(recv, nil, "ann@example.com", []string{"agent@corp.example"},
			mimeMail("ann@example.com", "agent@corp.example", "att1@example.com", "With attachment", `Content-Type: multipart/mixed; boundary="b1"`, body)); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		browse(t, ctx, 10*time.Second, "open the message and download", chromedp.Click(`//td/a[contains(., "With attachment")]`),
			chromedp.WaitVisible(`#files a`))
		if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: dir}); err != nil {
			t.Fatal(err)
		}
		browse(t, ctx, 10*time.Second, "download", chromedp.Click(`#files a`))
		var got []byte
		testutil.WaitFor(t, 10*time.Second, "the download", func() bool {
			got, _ = os.ReadFile(filepath.Join(dir, "blob.bin"))
			return len(got) == len(data)
		})
		if !bytes.Equal(got, data) {
			t.Fatalf("the download differs from the attachment (%d bytes, %d)", len(got), len(data))
		}
	})

	t.Run("hostile mail runs nothing", func(t *testing.T) {
		html := fmt.Sprintf(`<html><body><p>Hello</p><script>window.pwnedScript=1; new Image().src=%[1]q</script>
<img src="x" onerror="window.pwnedOnerror=1; fetch('%[2]s/onerror')">
<p><a id="evil" href="javascript:window.pwnedLink=1;fetch('%[2]s/link')">click me</a></p>
<img src="%[2]s/pixel.gif" alt="tracker"></body></html>`, watch.URL+"/script", watch.URL)
		if err := smtp.SendMail(recv, nil, "eve@example.com", []string{"agent@corp.example"},
			mimeMail("eve@example.com", "agent@corp.example", "evil1@example.com", "Hostile", `Content-Type: text/html; charset=utf-8`, html)); err != nil {
			t.Fatal(err)
		}
		for _, subject := range []string{"Hostile", "Raw hostile"} {
			browse(t, ctx, 10*time.Second, "open "+subject, chromedp.Navigate("http://"+web+"/ui/"),
				chromedp.Click(fmt.Sprintf(`//td/a[. = %q]`, subject)), chromedp.WaitVisible(`#body`))
			// Click every link of the body that is not a plain web link:
			// none may run script.
			read(t, ctx, "click its links", chromedp.Evaluate[int](`document.querySelectorAll("#body a").forEach(a => { if (!a.href.startsWith("http")) a.click() }); 0`))
			browse(t, ctx, 5*time.Second, "wait", chromedp.Sleep(500*time.Millisecond))
			pwned := read(t, ctx, "the globals", chromedp.Evaluate[bool](`!!(window.pwnedScript || window.pwnedOnerror || window.pwnedLink)`))
			bodyHTML := read(t, ctx, "the body", chromedp.InnerHTML("#body"))
			if pwned || hits.Load() != 0 {
				t.Fatalf("%s ran or loaded something (globals %v, %d hits on the watched URL):\n%s", subject, pwned, hits.Load(), bodyHTML)
			}
			if strings.Contains(bodyHTML, "<img") || strings.Contains(bodyHTML, "javascript:") || strings.Contains(bodyHTML, "<script") {
				t.Errorf("%s: the body: %s", subject, bodyHTML)
			}
		}
	})

	var draft string
	t.Run("retry and cancel a draft", func(t *testing.T) {
		out, e, code := cli(t, ws, "", "send", "--provider", "email", "--to", "carol@example.com", "--subject", "Stuck reply", "--text", "hi", "--format", "json")
		if code != 0 {
			t.Fatalf("send: %d %s", code, e)
		}
		var res struct{ ID string }
		json.Unmarshal([]byte(out), &res)
		draft = res.ID
		row := fmt.Sprintf(`tr[data-id=%q]`, draft)
		browse(t, ctx, 20*time.Second, "the draft waits after a failed attempt", chromedp.Navigate("http://"+web+"/ui/outbound"),
			chromedp.WaitVisible(row+`[data-status="waiting"] button.verb-retry`))
		browse(t, ctx, 10*time.Second, "retry", chromedp.Click(row+` button.verb-retry`), chromedp.WaitVisible(`#notice`))
		notice := read(t, ctx, "the notice", chromedp.Text(`#notice`))
		if !strings.Contains(notice, draft) {
			t.Errorf("after retry: %q", notice)
		}
		browse(t, ctx, 20*time.Second, "cancel", chromedp.Navigate("http://"+web+"/ui/outbound"), chromedp.WaitVisible(row+` button.verb-cancel`),
			chromedp.Click(row+` button.verb-cancel`), chromedp.WaitVisible(row+`[data-status="dead"]`))
		if out, _, _ := cli(t, ws, "", "outbound", "list", "--format", "json"); !strings.Contains(out, `"status": "dead"`) {
			t.Errorf("after cancel, outbound list: %s", out)
		}
	})

	t.Run("cross-site POST refused", func(t *testing.T) {
		if draft == "" {
			t.Skip("no draft")
		}
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<form id="f" method="post" action="http://%s/ui/outbound/requeue/%s"><input name="csrf" value="guess"></form><script>document.getElementById("f").submit()</script>`, web, draft)
		}))
		defer evil.Close()
		browse(t, ctx, 10*time.Second, "the cross-site form", chromedp.Navigate(evil.URL), chromedp.Sleep(time.Second))
		text := read(t, ctx, "the answer", chromedp.Text("body"))
		if out, _, _ := cli(t, ws, "", "outbound", "list", "--format", "json"); !strings.Contains(out, `"status": "dead"`) || strings.Contains(out, `"status": "queued"`) {
			t.Fatalf("a cross-site POST requeued the draft (the page said %q): %s", text, out)
		}
	})
}

// A person approves a held reply by clicking, and it reaches the SMTP
// peer, once, with who approved it on the archived draft; another,
// rejected with a reason typed in the page, never does and is
// dead-lettered with that reason.
func TestWebApproveInBrowser(t *testing.T) {
	ctx := newBrowser(t)
	me := agents.UserName()
	sink := testutil.StartSMTPSink(t, nil)
	ws, web := outboundWS(t, sink, fmt.Sprintf("approval: all, approvers: {users: [%s]}", me))
	startServe(t, ws, web)
	ok := sendAs(t, ws, "bot", "ann@example.com")
	no := sendAs(t, ws, "bot", "zed@example.com")
	out, e, code := cli(t, ws, "", "web")
	if code != 0 {
		t.Fatalf("courier web: %d %s", code, e)
	}
	browse(t, ctx, 20*time.Second, "log in", chromedp.Navigate(strings.TrimSpace(out)), chromedp.WaitVisible(`body`))
	row := func(id string) string { return fmt.Sprintf(`tr[data-id=%q]`, id) }
	browse(t, ctx, 20*time.Second, "approve", chromedp.Navigate("http://"+web+"/ui/outbound"),
		chromedp.WaitVisible(row(ok)+`[data-status="awaiting_approval"] button.verb-approve`),
		chromedp.Click(row(ok)+` button.verb-approve`), chromedp.WaitVisible(`#notice`))
	testutil.WaitFor(t, 20*time.Second, "the approved reply at the peer", func() bool { return len(sink.Messages(t)) > 0 })
	testutil.WaitFor(t, 20*time.Second, "the approved reply archived", func() bool { return outList(t, ws)[ok].Status == "" })
	// A live update reloads the page's content: the notice answering the
	// click stays (an update wiped it, on a loaded machine before the
	// person, or this test, could see it). The update here: another reply
	// rejected from the command line once the page's feed is open.
	read(t, ctx, "the page's live feed", chromedp.Poll[bool](`document.getElementById("live-state").textContent === "live"`))
	extra := sendAs(t, ws, "bot", "yan@example.com")
	if _, e, code := cli(t, ws, "", "reject", extra, "--reason", "an update for the page"); code != 0 {
		t.Fatalf("reject %s: %d %s", extra, code, e)
	}
	read(t, ctx, "the live update", chromedp.Poll[bool](`(window.courierUpdates || 0) > 0`))
	if n := read(t, ctx, "the notice after the update", chromedp.Evaluate[string](`(document.getElementById("notice") || {}).textContent || ""`)); !strings.Contains(n, ok) {
		t.Errorf("after the live update the notice is %q, want the approval of %s", n, ok)
	}
	if a := filedDraft(t, ws, "archive", ok).Delivery.Approval; a == nil || a.Status != schema.ApprovalApproved || a.By != me {
		t.Errorf("the archived approval: %+v", a)
	}
	browse(t, ctx, 20*time.Second, "reject", chromedp.Navigate("http://"+web+"/ui/outbound"),
		chromedp.WaitVisible(row(no)+` button.verb-reject`),
		chromedp.SendKeys(row(no)+` input[name="reason"]`, "not to this customer"),
		chromedp.Click(row(no)+` button.verb-reject`), chromedp.WaitVisible(`#notice`))
	testutil.WaitFor(t, 20*time.Second, "the rejected reply dead", func() bool { return outList(t, ws)[no].Status == mailbox.OutDead })
	if r := outList(t, ws)[no].Reason; !strings.Contains(r, "not to this customer") {
		t.Errorf("the rejected reply's reason: %q", r)
	}
	time.Sleep(1500 * time.Millisecond) // past a rescan: nothing more goes out
	if msgs := sink.Messages(t); len(msgs) != 1 {
		t.Errorf("the peer got %d messages, want the approved one only", len(msgs))
	}
}
