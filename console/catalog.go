package console

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/engine/gate"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/policy/plan"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
)

func (s *Server) routeCatalog() {
	s.mux.HandleFunc("GET /catalog", s.page(s.catalogList))
	s.mux.HandleFunc("GET /catalog/{kind}/{name}", s.page(s.catalogObject))
	s.mux.HandleFunc("POST /catalog/{kind}/{name}/revisions/{id}/propose", s.action(ports.ScopeWrite, s.revisionChange(
		func(r *http.Request, c catalog.Change) (ports.Revision, error) {
			return s.o.Catalog.Propose(r.Context(), c)
		})))
	s.mux.HandleFunc("POST /catalog/{kind}/{name}/revisions/{id}/approve", s.action(ports.ScopeApprove, s.revisionChange(
		func(r *http.Request, c catalog.Change) (ports.Revision, error) {
			return s.o.Catalog.Approve(r.Context(), catalog.ApproveParams{Ref: c.Ref, Version: c.Version, Approver: sessionOf(r.Context()).Name})
		})))
}

// catalogEntry is one catalog object with its revisions' states.
type catalogEntry struct {
	Kind      revision.Kind
	Name      string
	Revisions int
	Latest    int // highest published number, 0 when none
	Open      string
}

// catalogListView is the catalog page.
type catalogListView struct {
	Objects []catalogEntry
	Cut     bool
}

// catalogList lists the catalog's objects.
func (s *Server) catalogList(w http.ResponseWriter, r *http.Request) {
	rs, err := s.o.Catalog.List(r.Context(), ports.CatalogListParams{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var v catalogListView
	for _, rev := range rs {
		n := len(v.Objects)
		if n == 0 || v.Objects[n-1].Kind != rev.Kind || v.Objects[n-1].Name != rev.Name {
			if n == maxRows {
				v.Cut = true
				break
			}
			v.Objects = append(v.Objects, catalogEntry{Kind: rev.Kind, Name: rev.Name})
			n++
		}
		e := &v.Objects[n-1]
		e.Revisions++
		e.Latest = max(e.Latest, rev.Revision)
		if rev.Lifecycle == revision.Draft || rev.Lifecycle == revision.Proposed {
			e.Open = string(rev.Lifecycle)
		}
	}
	s.render(w, r, "catalog", "Catalog", "catalog", v)
}

// diffView is a diff between two revisions' contents.
type diffView struct {
	From, To ports.Revision
	Lines    []diffLine
	// TooLarge is set when the contents are too long to diff here.
	TooLarge bool
}

// catalogObjectView is one object's revisions page.
type catalogObjectView struct {
	Kind      revision.Kind
	Name      string
	Revisions []ports.Revision
	Diff      *diffView
	// FromID and ToID are the revisions picked for the diff.
	FromID, ToID string
	// History is the audit log of the object's writes, newest first.
	History []ports.AuditEntry
	// Plan is, for a policy with an open draft or proposal (PlanOf),
	// what publishing it would change (gate.Publishing, as catalog plan):
	// its first maxPlanTargets targets, Summary counting them all;
	// PlanError says why it could not be computed.
	Plan      *plan.Diff
	Summary   plan.Summary
	PlanOf    string
	PlanError string
}

// maxPlanTargets bounds the targets the revision page lists.
const maxPlanTargets = 200

// publishingPlan fills v's plan of publishing the policy's open revision,
// the last of rs, if it is a draft or a proposal.
func (s *Server) publishingPlan(r *http.Request, v *catalogObjectView) {
	open := v.Revisions[len(v.Revisions)-1]
	if v.Kind != revision.KindPolicy || s.o.Chain == nil || (open.Lifecycle != revision.Draft && open.Lifecycle != revision.Proposed) {
		return
	}
	v.PlanOf = open.ID
	p, err := ports.PolicyOf(open)
	if err != nil {
		v.PlanError = err.Error()
		return
	}
	tx, _ := s.o.Releases.(ports.Transactor)
	d, err := gate.Publishing(r.Context(), tx, s.o.Releases, p.Value, func(ps []ports.Stored[policy.Policy]) gate.Decider { return s.o.Chain.DecideManyWith(ps) })
	if err != nil {
		v.PlanError = err.Error()
		return
	}
	v.Summary = d.Summary()
	page, _ := d.Page("", maxPlanTargets)
	v.Plan = &page
}

// catalogObject lists an object's revisions and, with ?from=ID&to=ID,
// the diff between two of them.
func (s *Server) catalogObject(w http.ResponseWriter, r *http.Request) {
	kind, name := revision.Kind(r.PathValue("kind")), r.PathValue("name")
	if err := (revision.Object{Kind: kind, Name: name}).Validate(); err != nil {
		s.fail(w, r, revision.Invalid(err))
		return
	}
	rs, err := s.o.Catalog.List(r.Context(), ports.CatalogListParams{Kind: kind, Name: name})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(rs) == 0 {
		s.problem(w, r, http.StatusNotFound, "no "+string(kind)+" named "+name+" in the catalog")
		return
	}
	v := catalogObjectView{Kind: kind, Name: name, Revisions: rs}
	q := r.URL.Query()
	v.FromID, v.ToID = q.Get("from"), q.Get("to")
	if v.FromID == "" && v.ToID == "" && len(rs) > 1 {
		v.FromID, v.ToID = rs[len(rs)-2].ID, rs[len(rs)-1].ID
	}
	if v.FromID != "" || v.ToID != "" {
		d := &diffView{}
		found := 0
		for _, rev := range rs {
			if rev.ID == v.FromID {
				d.From, found = rev, found+1
			}
			if rev.ID == v.ToID {
				d.To, found = rev, found+1
			}
		}
		if found != 2 {
			s.problem(w, r, http.StatusNotFound, "pick two revisions of "+name+" to compare (from, to)")
			return
		}
		a, b := contentLines(d.From.Content), contentLines(d.To.Content)
		if len(a) > maxDiffLines || len(b) > maxDiffLines {
			d.TooLarge = true
		} else {
			d.Lines = diffLines(a, b)
		}
		v.Diff = d
	}
	s.publishingPlan(r, &v)
	v.History = s.history(r, "catalog", name)
	s.render(w, r, "object", string(kind)+" "+name, "catalog", v)
}

// contentLines is a revision's content indented, one line a slice entry.
func contentLines(content json.RawMessage) []string {
	var b bytes.Buffer
	if err := json.Indent(&b, content, "", "  "); err != nil {
		b.Reset()
		b.Write(content)
	}
	return strings.Split(b.String(), "\n")
}

// revisionChange handles a lifecycle form: the revision at the version
// the page showed.
func (s *Server) revisionChange(do func(*http.Request, catalog.Change) (ports.Revision, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		kind, name := revision.Kind(r.PathValue("kind")), r.PathValue("name")
		version, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
		if err != nil || version < 1 {
			s.problem(w, r, http.StatusUnprocessableEntity, "version: want the revision's version, a positive integer")
			return
		}
		if kind == revision.KindPolicy && !sessionOf(r.Context()).Can(string(ports.ScopeApprove)) {
			s.problem(w, r, http.StatusForbidden, "a lifecycle change of a policy needs scope approve")
			return
		}
		c := catalog.Change{Ref: ports.RevisionRef{Kind: kind, Name: name, ID: r.PathValue("id")}, Version: version}
		if _, err := do(r, c); err != nil {
			s.fail(w, r, err)
			return
		}
		back(w, r, objectURL(kind, name))
	}
}

// objectURL is the console path of a catalog object.
func objectURL(kind revision.Kind, name string) string {
	return "/catalog/" + url.PathEscape(string(kind)) + "/" + url.PathEscape(name)
}
