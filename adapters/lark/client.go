package lark

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"

	lark "github.com/larksuite/oapi-sdk-go/v3"
	larkcore "github.com/larksuite/oapi-sdk-go/v3/core"
)

// The Sender calls Lark through the SDK's im/v1 client, with three things
// decided here rather than left to the SDK's defaults:
//
//   - Tokens: the SDK's token cache is off (WithEnableTokenCache(false))
//     and each call carries the adapter's own tenant token
//     (larkcore.WithTenantAccessToken). The SDK's cache is process-wide
//     (WithTokenCache replaces a package variable) and its retry on
//     99991663 re-reads the token Lark just refused; the adapter's
//     tenantToken is per adapter and is renewed on that code. The SDK is
//     not even given the app secret: it cannot send or log what it lacks.
//   - Transport: every request goes through sdkHTTP, which sends the
//     token to the configured host only (no redirect elsewhere, as for
//     resources), bounds the answer it reads (the SDK reads a body whole,
//     without a limit), and records the status and rate-limit header of
//     the call so that an answer that is not Lark's JSON (a gateway's
//     502 in text/plain) is still classified by its status.
//   - Logs: the SDK's logger writes to the adapter's at debug level, its
//     text redacted; by default it would print to stdout.

// maxAnswer bounds an API answer read: Lark's answers to the calls the
// Sender makes are a few KiB.
const maxAnswer = 1 << 20

// newSDKClient returns an im/v1 client on the adapter's base URL. It does
// no I/O.
func (a *Adapter) newSDKClient() *lark.Client {
	return lark.NewClient(a.cfg.AppID, "",
		lark.WithOpenBaseUrl(a.base),
		lark.WithEnableTokenCache(false),
		lark.WithHttpClient(&sdkHTTP{a: a, c: untimed(a.apiClient())}),
		lark.WithLogger(sdkLogger{a: a}),
		lark.WithLogLevel(larkcore.LogLevelWarn),
	)
}

// untimed drops c's overall timeout: each call is bounded by its context
// instead (sender.call), which gives an upload time by its size.
func untimed(c *http.Client) *http.Client {
	c.Timeout = 0
	return c
}

// callInfo is what sdkHTTP saw of one call's answer.
type callInfo struct {
	status int
	reset  string // x-ogw-ratelimit-reset: seconds until the limit resets
}

type callInfoKey struct{}

// withCallInfo returns a context whose calls through sdkHTTP record their
// answer's status in the returned callInfo.
func withCallInfo(ctx context.Context) (context.Context, *callInfo) {
	ci := &callInfo{}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

// sdkHTTP is the SDK's HttpClient (see above).
type sdkHTTP struct {
	a *Adapter
	c *http.Client
}

func (h *sdkHTTP) Do(req *http.Request) (*http.Response, error) {
	if !h.a.tokenHost(req.URL) {
		// The SDK builds URLs from the base URL; anything else is a bug,
		// and the token must not follow it.
		return nil, errors.New("lark: a call to another host than the configured Lark base URL was refused")
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return nil, err
	}
	if ci, ok := req.Context().Value(callInfoKey{}).(*callInfo); ok {
		ci.status = resp.StatusCode
		ci.reset = resp.Header.Get("x-ogw-ratelimit-reset")
	}
	resp.Body = &boundedBody{rc: resp.Body, left: maxAnswer}
	return resp, nil
}

// boundedBody fails a read past left bytes, so that an endless answer
// costs at most maxAnswer of memory.
type boundedBody struct {
	rc   io.ReadCloser
	left int64
}

var errAnswerTooLarge = fmt.Errorf("lark: the API's answer is over %d bytes", maxAnswer)

func (b *boundedBody) Read(p []byte) (int, error) {
	// One byte more than left tells a body of exactly the limit from a
	// longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errAnswerTooLarge
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

// sdkLogger takes the SDK's log lines to the adapter's logger at debug
// level (warnings at warn), redacted and clipped.
type sdkLogger struct{ a *Adapter }

func (l sdkLogger) line(args []any) string { return clip(l.a.redact(fmt.Sprint(args...)), 500) }

func (l sdkLogger) Debug(ctx context.Context, args ...any) {
	l.a.log.DebugContext(ctx, "lark sdk", "msg", l.line(args))
}
func (l sdkLogger) Info(ctx context.Context, args ...any) {
	l.a.log.DebugContext(ctx, "lark sdk", "msg", l.line(args))
}
func (l sdkLogger) Warn(ctx context.Context, args ...any) {
	l.a.log.WarnContext(ctx, "lark sdk", "msg", l.line(args))
}
func (l sdkLogger) Error(ctx context.Context, args ...any) {
	l.a.log.WarnContext(ctx, "lark sdk", "msg", l.line(args))
}
