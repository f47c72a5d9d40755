package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

// healthcheckCommand lets the container's HEALTHCHECK probe the daemon
// without a shell or an HTTP client in the image (distroless has neither).
func healthcheckCommand() *cobra.Command {
	var url string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "exit 0 if a running deltaflow answers its health endpoint",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return healthcheck(cmd.Context(), url, timeout)
		},
	}
	cmd.Flags().StringVar(&url, "url", "http://127.0.0.1:8080/healthz", "health endpoint `URL`")
	atLeast(cmd.Flags(), &timeout, "timeout", 3*time.Second, time.Millisecond, "give up after this long")
	return cmd
}

func healthcheck(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}
