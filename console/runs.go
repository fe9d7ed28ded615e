package console

import (
	"net/http"

	"github.com/reconcilerhq/reconciler/engine/runs"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile"
)

func (s *Server) routeRuns() {
	s.mux.HandleFunc("GET /runs", s.page(s.runs))
	s.mux.HandleFunc("GET /runs/{kind}/{id}", s.page(s.run))
}

// recentDecisions is how many decisions of each run the runs page shows.
const recentDecisions = 3

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
	// Decisions are the run's newest recorded decisions, newest first.
	Decisions []ports.RunDecision
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

// runs lists the runs of the four kinds with their state and newest
// decisions.
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
		for _, row := range rows {
			rr, err := s.runRowOf(r, row, recentDecisions)
			if err != nil {
				s.fail(w, r, err)
				return
			}
			sec.Runs = append(sec.Runs, rr)
		}
		v.Kinds = append(v.Kinds, sec)
	}
	s.render(w, r, "runs", "Runs", "runs", v)
}

// runRowOf is row with its newest decisions (at most limit).
func (s *Server) runRowOf(r *http.Request, row ports.RunRow, limit int) (runRow, error) {
	rr := runRow{Ref: row.Ref, State: row.State, Terminal: reconcile.MachineFor(row.Ref.Kind).IsTerminal(row.State), Repo: row.Repo,
		PR: row.PR, UpdatedAt: when(row.UpdatedAt)}
	if row.Pod != nil {
		rr.Pod = string(row.Pod.Phase)
	}
	ds, err := s.o.Runs.RunDecisions(r.Context(), row.Ref, limit)
	if err != nil {
		return rr, err
	}
	rr.Decisions = ds
	return rr, nil
}

// runView is one run with its decision history.
type runView struct {
	Run       runRow
	CreatedAt string
	Heartbeat string
	DependsOn []string
	// Waiting is why the run waits when its newest decision could not be
	// applied (runs.DecisionWaiting: no agent runtime, a failed launch).
	Waiting string
}

// run shows one run and every decision its store keeps.
func (s *Server) run(w http.ResponseWriter, r *http.Request) {
	ref := reconcile.RunRef{Kind: reconcile.RunKind(r.PathValue("kind")), ID: r.PathValue("id")}
	if !ref.Kind.Valid() {
		s.problem(w, r, http.StatusNotFound, "no run kind "+string(ref.Kind)+" (want repo, standalone, pr-review or persistent-agent)")
		return
	}
	row, err := s.o.Runs.RunGet(r.Context(), ref)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	rr, err := s.runRowOf(r, row, ports.RunDecisionsKept)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := runView{Run: rr, CreatedAt: when(row.CreatedAt), Heartbeat: when(row.Heartbeat), DependsOn: row.DependsOn}
	if len(rr.Decisions) > 0 && rr.Decisions[0].Action == runs.DecisionWaiting {
		v.Waiting = rr.Decisions[0].Reason
	}
	s.render(w, r, "run", string(ref.Kind)+" run "+ref.ID, "runs", v)
}
