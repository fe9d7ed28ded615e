package main

import (
	"log/slog"

	"k8s.io/klog/v2"
)

// routeKlog sends what client-go logs through klog (watch errors, retries,
// throttling) to the process logger, so --log-format json yields one format
// only. klog's logger is process-global; serve sets it once at start.
func routeKlog(log *slog.Logger) {
	klog.SetSlogLogger(log.With(slog.String("component", "client-go")))
}
