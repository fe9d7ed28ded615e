package main

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// check is one named health check: an error fails it; a detail is shown
// beside its result in the verbose listing.
type check func(context.Context) (detail string, err error)

// healthHandler serves a named set of checks the way Kubernetes components
// do: 200 "ok" when all pass, 503 otherwise; /<path>/<check> runs one check;
// ?verbose lists each check's result and detail.
func healthHandler(checks map[string]check) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
		defer cancel()
		names := make([]string, 0, len(checks))
		for n := range checks {
			names = append(names, n)
		}
		sort.Strings(names)
		parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
		if len(parts) == 2 {
			if _, ok := checks[parts[1]]; !ok {
				http.Error(w, fmt.Sprintf("no check %q", parts[1]), http.StatusNotFound)
				return
			}
			names = []string{parts[1]}
		}
		var b strings.Builder
		failed := false
		for _, n := range names {
			detail, err := checks[n](ctx)
			switch {
			case err != nil:
				failed = true
				fmt.Fprintf(&b, "[-]%s failed: %v\n", n, err)
			case detail != "":
				fmt.Fprintf(&b, "[+]%s ok: %s\n", n, detail)
			default:
				fmt.Fprintf(&b, "[+]%s ok\n", n)
			}
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if failed {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		if _, verbose := r.URL.Query()["verbose"]; verbose || failed {
			fmt.Fprint(w, b.String())
		}
		if failed {
			fmt.Fprintln(w, "not ok")
			return
		}
		fmt.Fprintln(w, "ok")
	})
}

func promhttpHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}
