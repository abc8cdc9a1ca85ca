package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/monoco/courier/internal/agentapi"
	"github.com/monoco/courier/internal/fault"
)

// webCommand is `courier web`: a login link to the web viewer of the
// running service (internal/webui, docs/web.md).
func (a *app) webCommand() *cobra.Command {
	var open bool
	c := &cobra.Command{
		Use:   "web",
		Short: "Print a one-time login link to the web viewer of the running service (--open starts the browser)",
		Long: `Print a link that logs a browser in to the web viewer: every provider's
messages, threads, the outbound queue, live. The service must be running;
the link is asked of it over its socket, which only the service's user (or
root) may do, works once and for two minutes, and is traded for a session
cookie when opened. The viewer is served on courier.http.listen under /ui/.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			path := cfg.SocketPath(a.root)
			conn, err := agentapi.Dial(cmd.Context(), path)
			switch {
			case errors.Is(err, fs.ErrPermission):
				return fault.Errorf(fault.NoPermission, "courier web: %v: only the service's user (or root) may open the web viewer", err)
			case err != nil:
				return fault.Errorf(fault.NoService, "courier web needs the service running: %v (start it with `courier start` or systemctl start courier)", err)
			}
			defer conn.Close()
			login, err := conn.WebLogin(cmd.Context())
			if err != nil {
				var e *agentapi.Error
				if errors.As(err, &e) {
					return fault.Wrap(fault.OfExitCode(e.Code), errors.New(e.Message))
				}
				return fault.Wrap(fault.Unavailable, err)
			}
			url := "http://" + browserHost(cfg.Courier.HTTP.Listen) + login.Path
			fmt.Fprintln(a.stdout, url)
			if open {
				if err := exec.Command("xdg-open", url).Start(); err != nil {
					return fault.Errorf(fault.Unavailable, "--open: cannot start the browser with xdg-open: %v (open the link above yourself)", err)
				}
			}
			return nil
		},
	}
	c.Flags().BoolVar(&open, "open", false, "open the link in the desktop's browser (xdg-open)")
	return c
}

// browserHost is the listen address as a browser on this machine reaches
// it: an unspecified host (":9000", "0.0.0.0:9000") is localhost.
func browserHost(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
