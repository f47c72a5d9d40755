package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/deltaflow/deltaflow/runtime/daemon"
)

// healthcheckCommand lets the container's HEALTHCHECK probe the daemon
// without a shell or an HTTP client in the image (distroless has neither).
// The endpoint comes from the daemon's own configuration, so moving
// http.listen moves the healthcheck with it.
func healthcheckCommand() *cobra.Command {
	var target, config string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "exit 0 if a running deltaflow answers its health endpoint",
		Long: "healthcheck asks a running deltaflow's /healthz, at --url or else where the configuration's\n" +
			"http.listen (or $DELTAFLOW_HTTP_LISTEN) says the daemon serves it.",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := healthURL(target, config, os.Getenv)
			if err != nil {
				return err
			}
			return healthcheck(cmd.Context(), u, timeout)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&target, "url", "", "health endpoint `URL` (a bare http://host:port gets /healthz); default: from http.listen")
	configFlag(fs, &config, "deltaflow configuration `FILE` whose http.listen gives the endpoint")
	atLeast(fs, &timeout, "timeout", 3*time.Second, time.Millisecond, "give up after this long")
	return cmd
}

// healthURL is the endpoint to ask: target with /healthz added when it has
// no path, else http://<http.listen>/healthz of the configuration (file and
// environment, as run reads them), a wildcard host asked on loopback.
func healthURL(target, config string, getenv func(string) string) (string, error) {
	if target != "" {
		u, err := url.Parse(target)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return "", usagef("--url %q: want http://host:port[/path]", target)
		}
		if u.Path == "" || u.Path == "/" {
			u.Path = "/healthz"
		}
		return u.String(), nil
	}
	cfg, err := daemon.Load(config, getenv)
	if err != nil {
		return "", err
	}
	if cfg.HTTP.Listen == "" {
		return "", fmt.Errorf("http.listen is empty: deltaflow serves no health endpoint (set http.listen, or pass --url)")
	}
	host, port, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		return "", fmt.Errorf("http.listen %q: %w", cfg.HTTP.Listen, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/healthz", nil
}

func healthcheck(ctx context.Context, endpoint string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		// A *url.Error says the method and URL itself: keep its cause.
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", endpoint, resp.Status)
	}
	return nil
}
