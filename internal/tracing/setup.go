package tracing

import (
	"context"
	"fmt"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// CheckEndpoint checks an OTLP/HTTP endpoint URL: http or https with a
// host.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("not an http(s) URL with a host: %q", endpoint)
	}
	return nil
}

// Export starts exporting the daemon's spans over OTLP/HTTP to endpoint (a
// URL; without a path, OTLP's /v1/traces) in batches, and makes
// that the provider of every span. shutdown flushes the spans still
// queued and restores the no-op provider.
func Export(ctx context.Context, endpoint, version string) (shutdown func(context.Context) error, err error) {
	if err := CheckEndpoint(endpoint); err != nil {
		return nil, err
	}
	u, _ := url.Parse(endpoint) // checked
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(resource.NewSchemaless(
		attribute.String("service.name", "reconciler"), attribute.String("service.version", version))))
	restore := SetProvider(tp)
	return func(ctx context.Context) error {
		restore()
		if err := tp.Shutdown(ctx); err != nil {
			return fmt.Errorf("otlp exporter: flush: %w", err)
		}
		return nil
	}, nil
}
