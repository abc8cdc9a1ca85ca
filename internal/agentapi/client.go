package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Client talks to the service over its socket.
type Client struct {
	path string
	hc   *http.Client

	mu    sync.Mutex
	first net.Conn // the connection Dial opened, for the first request
}

// DialError is a failure to connect to the socket. Its Err says why:
// errors.Is(err, fs.ErrPermission) when the socket (or its folder) is
// there but this user may not use it; fs.ErrNotExist or
// syscall.ECONNREFUSED when no service listens.
type DialError struct {
	Path string
	Err  error
}

func (e *DialError) Error() string { return fmt.Sprintf("agentapi: connect to %s: %v", e.Path, e.Err) }

func (e *DialError) Unwrap() error { return e.Err }

// maxAnswer bounds what the client reads of an answer: a send's is about
// twice the draft, which the config bounds far below this.
const maxAnswer = 64 << 20

// Dial connects to the service's socket at path. It returns a *DialError
// when no connection opens.
func Dial(ctx context.Context, path string) (*Client, error) {
	c := &Client{path: path}
	conn, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	c.first = conn
	c.hc = &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c.mu.Lock()
			conn := c.first
			c.first = nil
			c.mu.Unlock()
			if conn != nil {
				return conn, nil
			}
			return c.dial(ctx)
		},
		MaxIdleConns: 1,
		// An artifact crosses in writes of this size, not 4 KiB ones.
		WriteBufferSize: ioBuffer,
		// Once the request is written, the service answers in well under
		// this (its database waits at most 10 s for a lock): a service that
		// hangs is reported, not waited for forever.
		ResponseHeaderTimeout: time.Minute,
	}}
	return c, nil
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var conn net.Conn
	err := withShortPath(c.path, func(addr string) error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, "unix", addr)
		return err
	})
	if err != nil {
		if oe, ok := err.(*net.OpError); ok {
			err = oe.Err
		}
		return nil, &DialError{Path: c.path, Err: err}
	}
	return conn, nil
}

// Path returns the socket's path.
func (c *Client) Path() string { return c.path }

// Close closes the client's connections.
func (c *Client) Close() {
	c.mu.Lock()
	if c.first != nil {
		c.first.Close()
		c.first = nil
	}
	c.mu.Unlock()
	c.hc.CloseIdleConnections()
}

// WhoAmI returns who the service takes this process for, and the agent
// name it defaults to.
func (c *Client) WhoAmI(ctx context.Context) (Caller, string, error) {
	var who struct {
		Caller
		Agent string `json:"agent"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/whoami", "", nil, &who)
	return who.Caller, who.Agent, err
}

// Claim asks the service for a claim.
func (c *Client) Claim(ctx context.Context, req ClaimRequest) (Outcome, error) {
	return c.outcome(ctx, "/v1/claim", req)
}

// Done marks a claimed message processed.
func (c *Client) Done(ctx context.Context, req DoneRequest) (Outcome, error) {
	return c.outcome(ctx, "/v1/done", req)
}

// Fail gives a claimed message back.
func (c *Client) Fail(ctx context.Context, req FailRequest) (Outcome, error) {
	return c.outcome(ctx, "/v1/fail", req)
}

func (c *Client) outcome(ctx context.Context, path string, req any) (Outcome, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return Outcome{}, err
	}
	var o Outcome
	err = c.do(ctx, http.MethodPost, path, "application/json", bytes.NewReader(body), &o)
	return o, err
}

// Outbound asks the service for an outbound verb (retry, requeue,
// cancel); a refusal is an *Error.
func (c *Client) Outbound(ctx context.Context, req OutboundRequest) (*OutboundResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	var res OutboundResult
	if err := c.do(ctx, http.MethodPost, "/v1/outbound", "application/json", bytes.NewReader(body), &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// Send sends a draft; open gives the content of the artifact at index i for
// each of req.Files, in order, and is called while the request is written
// (the content is streamed, never held whole). A refusal is an *Error.
func (c *Client) Send(ctx context.Context, req *SendRequest, open func(i int) (io.ReadCloser, error)) (*SendResult, error) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		pw.CloseWithError(writeSend(mw, req, open))
	}()
	var res SendResult
	err := c.do(ctx, http.MethodPost, "/v1/send", mw.FormDataContentType(), pr, &res)
	pr.Close()
	if err != nil {
		return nil, err
	}
	return &res, nil
}

func writeSend(mw *multipart.Writer, req *SendRequest, open func(i int) (io.ReadCloser, error)) error {
	w, err := mw.CreateFormField("request")
	if err != nil {
		return err
	}
	if err := json.NewEncoder(w).Encode(req); err != nil {
		return err
	}
	for _, f := range req.Files {
		w, err := mw.CreateFormField("artifact." + strconv.Itoa(f.Index))
		if err != nil {
			return err
		}
		r, err := open(f.Index)
		if err != nil {
			return fmt.Errorf("agentapi: artifacts[%d]: %w", f.Index, err)
		}
		_, err = io.Copy(w, r)
		r.Close()
		if err != nil {
			return fmt.Errorf("agentapi: artifacts[%d]: %w", f.Index, err)
		}
	}
	return mw.Close()
}

// do sends a request and decodes the answer into v; an answer that is a
// refusal is returned as an *Error.
func (c *Client) do(ctx context.Context, method, path, contentType string, body io.Reader, v any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://courier"+path, body)
	if err != nil {
		return err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("agentapi: the service at %s did not answer: %w", c.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("agentapi: reading the service's answer: %w", err)
	}
	if len(data) > maxAnswer {
		return fmt.Errorf("agentapi: the service's answer is over %d bytes", maxAnswer)
	}
	var refusal struct {
		Code    int     `json:"code"`
		Message *string `json:"error"`
	}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(data, &refusal); err == nil && refusal.Message != nil {
			return &Error{Code: refusal.Code, Message: *refusal.Message}
		}
		// A claim refused (conflict, not found) is an Outcome, not an
		// Error: it is decoded below.
		if _, ok := v.(*Outcome); !ok {
			return fmt.Errorf("agentapi: %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(data))
		}
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("agentapi: %s %s: the answer is not JSON: %w", method, path, err)
	}
	return nil
}
