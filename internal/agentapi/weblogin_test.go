package agentapi_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/monoco/courier/internal/agentapi"
)

type issuer struct{ got agentapi.Caller }

func (i *issuer) IssueLogin(_ context.Context, c agentapi.Caller) (*agentapi.WebLogin, error) {
	i.got = c
	if !c.Owner {
		return nil, &agentapi.Error{Code: 77, Message: "not the owner"}
	}
	return &agentapi.WebLogin{Token: "t", Path: "/ui/?login=t"}, nil
}

// The login goes to the issuer with the peer's credentials; before one is
// set, the socket says the viewer is not served.
func TestWebLogin(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "courier.sock")
	s := start(t, path, &backend{}, nil)
	c := dial(t, path)
	var e *agentapi.Error
	if _, err := c.WebLogin(ctx); !errors.As(err, &e) || e.Code != 69 {
		t.Fatalf("without an issuer: %v", err)
	}
	is := &issuer{}
	s.ServeLogin(is)
	l, err := c.WebLogin(ctx)
	if err != nil || l.Path != "/ui/?login=t" {
		t.Fatalf("WebLogin = %+v, %v", l, err)
	}
	if is.got.UID != uint32(os.Getuid()) || !is.got.Owner {
		t.Errorf("the issuer was asked for %+v", is.got)
	}
	// Another owner uid: this process is then an agent, refused (root
	// is always an owner).
	if os.Getuid() != 0 {
		other := uint32(os.Getuid() + 1)
		path2 := filepath.Join(t.TempDir(), "run", "courier.sock")
		start(t, path2, &backend{}, &agentapi.Options{Owner: &other}).ServeLogin(is)
		if _, err := dial(t, path2).WebLogin(ctx); !errors.As(err, &e) || e.Code != 77 {
			t.Fatalf("an agent's login: %v", err)
		}
	}
}
