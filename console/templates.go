package console

import (
	"fmt"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

// parsePages parses each page template with the layout it fills in.
func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"targetURL":   targetURL,
		"planURL":     planURL,
		"workflowURL": workflowURL,
		"versionsURL": func(id string) string { return "/deployments/" + url.PathEscape(id) + "/versions" },
		"objectURL":   func(k revision.Kind, name string) string { return objectURL(k, name) },
		"revisionURL": func(k revision.Kind, name, id, verb string) string {
			return objectURL(k, name) + "/revisions/" + url.PathEscape(id) + "/" + verb
		},
		"when":       when,
		"lower":      func(v any) string { return strings.ToLower(fmt.Sprint(v)) },
		"join":       strings.Join,
		"approvable": approvable,
		"csrfField":  func() string { return CSRFField },
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if name == "layout" || strings.HasPrefix(name, "_") { // the layout and partials (_NAME) go into every page
			continue
		}
		pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/_*.html", f))
	}
	return pages
}

// when formats a time for a page: UTC to the second, "—" when zero.
func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// workflowURL is the console path of a workflow.
func workflowURL(id string) string { return "/workflows/" + url.PathEscape(id) }
