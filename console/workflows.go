package console

import (
	"net/http"

	"github.com/reconcilerhq/reconciler/engine/flow"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

func (s *Server) routeWorkflows() {
	s.mux.HandleFunc("GET /workflows", s.page(s.workflows))
	s.mux.HandleFunc("GET /workflows/{id}", s.page(s.workflowPage))
	s.mux.HandleFunc("GET /workflows/{id}/live", s.page(s.workflowLive))
	s.mux.HandleFunc("POST /workflows/{id}/cancel", s.action(ports.ScopeWrite, s.cancelWorkflow))
	s.mux.HandleFunc("POST /workflows/{id}/task-runs/{run}/approve", s.action(ports.ScopeApprove, s.approveTaskRun))
}

// workflowsView is the workflow list.
type workflowsView struct {
	Workflows []ports.WorkflowRecord
	// Next continues the list after the last one shown.
	Next string
}

// workflowPageSize is how many workflows the list shows at a time.
const workflowPageSize = 100

// workflows lists workflows by id, a page at a time (?after=ID).
func (s *Server) workflows(w http.ResponseWriter, r *http.Request) {
	ws, err := s.o.Workflows.WorkflowList(r.Context(), r.URL.Query().Get("after"), workflowPageSize+1)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := workflowsView{Workflows: ws}
	if len(ws) > workflowPageSize {
		v.Workflows = ws[:workflowPageSize]
		v.Next = ws[workflowPageSize-1].ID
	}
	s.render(w, r, "workflows", "Workflows", "workflows", v)
}

// workflowView is one workflow: its DAG and TaskRuns.
type workflowView struct {
	Workflow ports.WorkflowRecord
	Graph    dag
	TaskRuns []ports.TaskRunRecord
	// Live is set while the workflow runs: the page keeps polling.
	Live bool
}

func (s *Server) workflowData(r *http.Request) (workflowView, error) {
	st, err := s.o.Flows.Status(r.Context(), r.PathValue("id"))
	if err != nil {
		return workflowView{}, err
	}
	return newWorkflowView(st), nil
}

// newWorkflowView lays out a workflow's DAG; configs, dispatch copies and
// outputs are left out (they may name secrets).
func newWorkflowView(st flow.Status) workflowView {
	for i := range st.TaskRuns {
		st.TaskRuns[i].Config, st.TaskRuns[i].Dispatch, st.TaskRuns[i].Outputs = nil, nil, nil
	}
	return workflowView{Workflow: st.Workflow, Graph: layoutDAG(st.Workflow, st.TaskRuns), TaskRuns: st.TaskRuns,
		Live: !st.Workflow.Phase.Terminal()}
}

// workflowPage shows one workflow.
func (s *Server) workflowPage(w http.ResponseWriter, r *http.Request) {
	v, err := s.workflowData(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.render(w, r, "workflow", "Workflow "+v.Workflow.ID, "workflows", v)
}

// workflowLive is the workflow's live part alone (polled while it runs).
func (s *Server) workflowLive(w http.ResponseWriter, r *http.Request) {
	v, err := s.workflowData(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.fragment(w, r, "workflow", "live", v)
}

// cancelWorkflow requests a workflow's cancellation.
func (s *Server) cancelWorkflow(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.o.Flows.Cancel(r.Context(), id); err != nil {
		s.fail(w, r, err)
		return
	}
	back(w, r, workflowURL(id))
}

// approveTaskRun records the session user's approval of an approval task.
func (s *Server) approveTaskRun(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.o.Flows.Approve(r.Context(), id, r.PathValue("run"), sessionOf(r.Context()).Name); err != nil {
		s.fail(w, r, err)
		return
	}
	back(w, r, workflowURL(id))
}

// approvable reports whether a TaskRun waits for an approval.
func approvable(r ports.TaskRunRecord) bool {
	return r.Type == workflow.TaskApproval && r.Phase == workflow.TaskRunning
}
