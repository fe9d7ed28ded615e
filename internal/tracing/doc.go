// Package tracing carries OpenTelemetry traces through the daemon: the
// spans of API requests, queue passes, outbound calls and the release
// chain's transactions, and the W3C trace context (`traceparent`) that
// travels with the work to the queue, the jobs and the agents.
//
// Invariants: until SetProvider installs a recording provider (serve
// --otlp-endpoint), the provider is OpenTelemetry's no-op one: spans are
// not recorded, nothing is exported, and Traceparent is empty unless a
// caller's request brought a trace context; Traceparent and Remote
// round-trip a valid context and ignore an invalid one; the queue
// decorator (Queue) changes no queue behaviour, it only remembers, per
// work key and bounded, the trace context of the last traced enqueue.
package tracing
