package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/spf13/cobra"
)

// newHealthcheckCmd probes a serve's health endpoint: the container
// health check of images without a shell or curl (distroless).
func newHealthcheckCmd() *cobra.Command {
	var (
		target  string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when a serve's health endpoint answers 200 (for container health checks)",
		Long: `healthcheck sends GET --url (default http://127.0.0.1:8080/readyz) and exits 0
when it answers 200 OK within --timeout, 1 otherwise, printing why. The image's
HEALTHCHECK and compose.yaml use it: the image has no shell or curl.`,
		Args: argsUsage(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := url.Parse(target)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return usagef("--url: want an http(s) URL, got %q", target)
			}
			return probe(cmd.Context(), cmd.OutOrStdout(), u.String(), timeout)
		},
	}
	cmd.Flags().StringVar(&target, "url", "http://127.0.0.1:8080/readyz", "health endpoint to probe")
	durationRangeVar(cmd.Flags(), &timeout, "timeout", 3*time.Second, 100*time.Millisecond, time.Minute, "longest wait for the answer")
	return cmd
}

// probe GETs target and succeeds on 200 OK.
func probe(ctx context.Context, out io.Writer, target string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: %s answered %s: %s", target, res.Status, body)
	}
	fmt.Fprintf(out, "%s", body)
	return nil
}
