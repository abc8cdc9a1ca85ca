package lark

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
)

// Lark's codes for a permission the app was not granted: 99991672 (the
// app lacks a scope; msg lists the scopes that would do) and 99991679 (a
// user-consent scope).
const (
	codeNoScope     = 99991672
	codeNoUserScope = 99991679
	// codeRateLimited is Lark's "too many requests" (with HTTP 429).
	codeRateLimited = 99991400
)

// scopeProbes are the reads doctor tries, each needing a permission
// Courier uses; Lark names the missing scope in its answer. Sending needs
// im:message:send_as_bot too, which no read can probe: doctor says so.
var scopeProbes = []struct{ path, use string }{
	{"/open-apis/im/v1/chats?page_size=1", "listing the chats the app is in (the catch-up after a gap)"},
}

// checks are what `courier doctor` asks: a tenant token (app_id and
// app_secret), then the permissions, by a read that needs each.
func (a *Adapter) checks() []adapters.Check {
	return []adapters.Check{
		{Name: "lark tenant token (auth/v3/tenant_access_token/internal)", Run: func(ctx context.Context) error {
			_, err := a.tenantToken(ctx, true)
			return err
		}},
		{Name: "lark permissions (im/v1 reads)", Run: a.checkScopes},
	}
}

// checkScopes runs the probes and names every permission Lark refused.
func (a *Adapter) checkScopes(ctx context.Context) error {
	var missing []string
	for _, p := range scopeProbes {
		err := a.apiGet(ctx, p.path, nil)
		var ae *apiError
		switch {
		case err == nil:
		case errors.As(err, &ae) && (ae.Code == codeNoScope || ae.Code == codeNoUserScope):
			missing = append(missing, fmt.Sprintf("%s: Lark says %q", p.use, ae.Msg))
		default:
			return err
		}
	}
	if len(missing) > 0 {
		return &lacksPermissions{fmt.Sprintf("lark: the app lacks permissions: %s; grant them in the developer console (Permissions & Scopes) and publish a new version of the app", strings.Join(missing, "; "))}
	}
	return nil
}

// apiError is an answer of Lark's API with a code other than 0.
type apiError struct {
	Path   string
	Status int
	Code   int
	Msg    string // redacted and clipped
}

func (e *apiError) Error() string {
	return fmt.Sprintf("lark: %s: code %d: %s", e.Path, e.Code, e.Msg)
}

// retryable reports an API error worth trying again: a rate limit or a
// server's failure.
func retryable(ae *apiError) bool {
	return ae.Code == codeRateLimited || ae.Status == http.StatusTooManyRequests || ae.Status >= 500
}

// apiGet GETs a Lark API path with the tenant token (fetched again once
// when Lark refuses it) and decodes its data into out (nil: ignored). An
// answer with a code other than 0 is an *apiError; a rate limit, a 5xx or
// a network failure is Temporary.
func (a *Adapter) apiGet(ctx context.Context, path string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	shown, _, _ := strings.Cut(path, "?")
	for attempt := 0; ; attempt++ {
		tok, err := a.tenantToken(ctx, attempt > 0)
		if err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+path, nil)
		if err != nil {
			return fmt.Errorf("lark: %s: %w", shown, err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := a.apiClient().Do(req)
		if err != nil {
			return adapters.Temporary(fmt.Errorf("lark: %s: %s", shown, a.redact(err.Error())))
		}
		var r struct {
			Code int             `json:"code"`
			Msg  string          `json:"msg"`
			Data json.RawMessage `json:"data"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 4<<20)).Decode(&r)
		resp.Body.Close()
		switch {
		case err != nil && (resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500):
			return adapters.Temporary(fmt.Errorf("lark: %s: %s", shown, resp.Status))
		case err != nil:
			return fmt.Errorf("lark: %s: %s, and the answer is not Lark's JSON", shown, resp.Status)
		case (r.Code == codeMissingToken || r.Code == codeInvalidToken) && attempt == 0:
			continue
		case r.Code == codeRateLimited || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
			return adapters.Temporary(&apiError{Path: shown, Status: resp.StatusCode, Code: r.Code, Msg: clip(a.redact(r.Msg), 300)})
		case r.Code != 0:
			return &apiError{Path: shown, Status: resp.StatusCode, Code: r.Code, Msg: clip(a.redact(r.Msg), 300)}
		}
		if out != nil && len(r.Data) > 0 {
			if err := json.Unmarshal(r.Data, out); err != nil {
				return fmt.Errorf("lark: %s: data not as documented: %w", shown, err)
			}
		}
		return nil
	}
}

// lacksPermissions is checkScopes' answer when Lark refused a permission.
type lacksPermissions struct{ msg string }

func (e *lacksPermissions) Error() string { return e.msg }

// noteScopes runs doctor's permission probes in the running service:
// what doctor fails on, /health reports (degraded, naming it). A probe
// that could not be made (Lark out of reach) changes nothing.
func (a *Adapter) noteScopes(ctx context.Context) {
	var lacks *lacksPermissions
	switch err := a.checkScopes(ctx); {
	case err == nil:
		a.health.Lacking("")
	case errors.As(err, &lacks):
		a.health.Lacking(lacks.msg)
	}
}
