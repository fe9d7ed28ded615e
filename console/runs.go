package console

import (
	"net/http"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

func (s *Server) routeRuns() {
	s.mux.HandleFunc("GET /runs", s.page(s.runs))
}

// runsPageSize is how many runs of a kind the page shows at a time.
const runsPageSize = 50

// runRow is one run as the runs page shows it.
type runRow struct {
	Ref       reconcile.RunRef
	State     reconcile.State
	Terminal  bool
	Repo      string
	PR        *reconcile.PullRequest
	Pod       string
	UpdatedAt string
}

// runKind is one kind's section of the runs page.
type runKind struct {
	Kind reconcile.RunKind
	Runs []runRow
	// Next continues the kind's list after the last run shown.
	Next string
}

// runsView is the runs page: the four kinds, or one (?kind=K&after=ID).
type runsView struct {
	Kinds []runKind
}

// runs lists the runs of the four kinds with their state.
func (s *Server) runs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	kinds := reconcile.Kinds
	if k := reconcile.RunKind(q.Get("kind")); k != "" {
		if !k.Valid() {
			s.problem(w, r, http.StatusBadRequest, "kind: unknown run kind "+string(k)+" (want repo, standalone, pr-review or persistent-agent)")
			return
		}
		kinds = []reconcile.RunKind{k}
	}
	var v runsView
	for _, k := range kinds {
		rows, err := s.o.Runs.RunList(r.Context(), ports.RunListParams{Kind: k, AfterID: q.Get("after"), Limit: runsPageSize + 1})
		if err != nil {
			s.fail(w, r, err)
			return
		}
		sec := runKind{Kind: k}
		if len(rows) > runsPageSize {
			rows = rows[:runsPageSize]
			sec.Next = rows[runsPageSize-1].Ref.ID
		}
		m := reconcile.MachineFor(k)
		for _, row := range rows {
			rr := runRow{Ref: row.Ref, State: row.State, Terminal: m.IsTerminal(row.State), Repo: row.Repo, PR: row.PR,
				UpdatedAt: row.UpdatedAt.UTC().Format("2006-01-02 15:04:05Z")}
			if row.Pod != nil {
				rr.Pod = string(row.Pod.Phase)
			}
			sec.Runs = append(sec.Runs, rr)
		}
		v.Kinds = append(v.Kinds, sec)
	}
	s.render(w, r, "runs", "Runs", "runs", v)
}
