package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

const healthcheckUsage = "[--url http://127.0.0.1:8080/healthz] [--timeout 3s]"

// healthcheckCommand lets the container's HEALTHCHECK probe the daemon
// without a shell or an HTTP client in the image (distroless has neither).
func healthcheckCommand() *Command {
	return &Command{
		Name:    "healthcheck",
		Usage:   healthcheckUsage,
		Summary: "exit 0 if a running deltaflow answers its health endpoint",
		Run:     runHealthcheck,
	}
}

func runHealthcheck(ctx context.Context, out IO, args []string) error {
	fs := newFlagSet("healthcheck", healthcheckUsage, out.Stderr)
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "health endpoint `URL`")
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if pos, err := parseFlags(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", *url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", *url, resp.Status)
	}
	return nil
}
