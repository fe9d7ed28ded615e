package console

import (
	"net/http"

	"github.com/reconcilerhq/reconciler/api"
	"github.com/reconcilerhq/reconciler/ports"
)

func (s *Server) routeOperations() {
	s.mux.HandleFunc("GET /operations", s.page(s.operations))
	s.mux.HandleFunc("POST /operations/redrive", s.action(ports.ScopeAdmin, s.redrive))
}

// operationsView is the operations page: queue depth per kind and the
// dead-lettered items.
type operationsView struct {
	Kinds []api.KindDepth
	Dead  []ports.WorkItem
	Cut   bool
}

// operations shows the queue's depth per kind and its dead letters.
func (s *Server) operations(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, err := s.o.Queue.WorkKindStats(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ports.SortKindStats(st)
	dead, err := s.o.Queue.WorkDeadList(ctx, ports.DeadListParams{Limit: maxRows + 1})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := operationsView{Kinds: api.KindDepths(st, s.o.Clock.Now()), Dead: dead[:min(len(dead), maxRows)], Cut: len(dead) > maxRows}
	s.render(w, r, "operations", "Operations", "operations", v)
}

// redrive makes a dead-lettered item pending again, due now.
func (s *Server) redrive(w http.ResponseWriter, r *http.Request) {
	k := ports.WorkKey{Kind: r.PostFormValue("kind"), ScopeType: r.PostFormValue("scope_type"), ScopeID: r.PostFormValue("scope_id")}
	if k.Kind == "" || k.ScopeType == "" || k.ScopeID == "" {
		s.problem(w, r, http.StatusUnprocessableEntity, "kind, scope_type and scope_id are required")
		return
	}
	if err := s.o.Queue.WorkRedrive(r.Context(), k); err != nil {
		s.fail(w, r, err)
		return
	}
	back(w, r, "/operations")
}
