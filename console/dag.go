package console

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/workflow"
)

// Layout of the DAG drawing, in SVG user units.
const (
	dagMargin   = 16
	dagNodeW    = 220
	dagColGap   = 64
	dagRowGap   = 20
	dagHeader   = 30
	dagItemH    = 22
	dagMaxItems = 12 // matrix items drawn per task; the table lists all
)

// dag is a workflow's graph laid out for drawing: tasks in columns by
// depth (a task sits right of every task it depends on), each with its
// TaskRuns (one per matrix item) inside, and an edge per dependency.
type dag struct {
	Width, Height int
	Nodes         []dagNode
	Edges         []dagEdge
}

// dagNode is one task's box.
type dagNode struct {
	Name  string
	Type  string
	Phase string // the task's phase, summarised from its runs
	X, Y  int
	W, H  int
	Items []dagItem
	// More counts runs not drawn (beyond dagMaxItems).
	More int
}

// dagItem is one TaskRun inside its task's box.
type dagItem struct {
	Label string
	Phase string
	Y     int
}

// dagEdge is a dependency: a path from the dependency's box to the
// dependent's.
type dagEdge struct {
	From, To string
	Path     string
}

// layoutDAG lays out the pinned template's tasks with the stored runs.
// A template that does not decode is drawn from the runs alone.
func layoutDAG(w ports.WorkflowRecord, runs []ports.TaskRunRecord) dag {
	var tpl workflow.Template
	_ = json.Unmarshal(w.Template, &tpl)
	tasks := tpl.Spec.Tasks
	known := map[string]int{}
	for i, t := range tasks {
		known[t.Name] = i
	}
	byTask := map[string][]ports.TaskRunRecord{}
	for _, r := range runs {
		if _, ok := known[r.Task]; !ok {
			known[r.Task] = len(tasks)
			tasks = append(tasks, workflow.Task{Name: r.Task, Type: r.Type})
		}
		byTask[r.Task] = append(byTask[r.Task], r)
	}
	// Depth: the longest dependency chain before a task (cycles, which
	// validation refuses, are cut by the visit mark).
	depth := make([]int, len(tasks))
	state := make([]uint8, len(tasks))
	var visit func(i int) int
	visit = func(i int) int {
		switch state[i] {
		case 1:
			return 0
		case 2:
			return depth[i]
		}
		state[i] = 1
		d := 0
		for _, dep := range tasks[i].Dependencies {
			if j, ok := known[dep]; ok {
				d = max(d, visit(j)+1)
			}
		}
		depth[i], state[i] = d, 2
		return d
	}
	for i := range tasks {
		visit(i)
	}
	var g dag
	colY := map[int]int{}
	pos := map[string]*dagNode{}
	g.Nodes = make([]dagNode, 0, len(tasks))
	for i, t := range tasks {
		rs := byTask[t.Name]
		sort.SliceStable(rs, func(a, b int) bool { return rs[a].MatrixIndex < rs[b].MatrixIndex })
		n := dagNode{Name: t.Name, Type: string(t.Type), Phase: taskPhase(rs), W: dagNodeW}
		n.X = dagMargin + depth[i]*(dagNodeW+dagColGap)
		n.Y = dagMargin + colY[depth[i]]
		for k, r := range rs {
			if k == dagMaxItems {
				n.More = len(rs) - k
				break
			}
			n.Items = append(n.Items, dagItem{Label: runLabel(w, t, r), Phase: string(r.Phase), Y: n.Y + dagHeader + k*dagItemH})
		}
		rows := max(len(n.Items), 1)
		if n.More > 0 {
			rows++
		}
		n.H = dagHeader + rows*dagItemH + 6
		colY[depth[i]] += n.H + dagRowGap
		g.Width = max(g.Width, n.X+n.W+dagMargin)
		g.Height = max(g.Height, n.Y+n.H+dagMargin)
		g.Nodes = append(g.Nodes, n)
	}
	for i := range g.Nodes {
		pos[g.Nodes[i].Name] = &g.Nodes[i]
	}
	for _, t := range tasks {
		to := pos[t.Name]
		for _, dep := range t.Dependencies {
			from, ok := pos[dep]
			if !ok {
				continue
			}
			x1, y1 := from.X+from.W, from.Y+dagHeader/2
			x2, y2 := to.X-6, to.Y+dagHeader/2
			mid := (x1 + x2) / 2
			g.Edges = append(g.Edges, dagEdge{From: dep, To: t.Name,
				Path: fmt.Sprintf("M%d %d C%d %d %d %d %d %d", x1, y1, mid, y1, mid, y2, x2, y2)})
		}
	}
	return g
}

// taskPhase summarises a task's runs: failed or running if any is, done
// (succeeded, skipped or cancelled) when all are, else pending.
func taskPhase(rs []ports.TaskRunRecord) string {
	if len(rs) == 0 {
		return "NotStarted"
	}
	count := map[workflow.TaskPhase]int{}
	for _, r := range rs {
		count[r.Phase]++
	}
	for _, p := range []workflow.TaskPhase{workflow.TaskFailed, workflow.TaskRunning, workflow.TaskPending} {
		if count[p] > 0 {
			return string(p)
		}
	}
	for _, p := range []workflow.TaskPhase{workflow.TaskCancelled, workflow.TaskSkipped} {
		if count[p] == len(rs) {
			return string(p)
		}
	}
	return string(workflow.TaskSucceeded)
}

// runLabel names a TaskRun in its box: the matrix item, or the task.
func runLabel(w ports.WorkflowRecord, t workflow.Task, r ports.TaskRunRecord) string {
	label := t.Name
	if r.MatrixIndex != workflow.NoMatrix {
		label = fmt.Sprintf("#%d", r.MatrixIndex)
		if items := w.Matrix[t.MatrixParam()]; r.MatrixIndex >= 0 && r.MatrixIndex < len(items) {
			label += " " + itemLabel(items[r.MatrixIndex])
		}
	}
	if r.Attempt > 0 {
		label += fmt.Sprintf(" (attempt %d)", r.Attempt+1)
	}
	return clip(label, 30)
}

// itemLabel is a short name for a matrix item: its name or id field, or
// its value.
func itemLabel(item any) string {
	if m, ok := item.(map[string]any); ok {
		for _, k := range []string{"name", "id", "identifier"} {
			if v, ok := m[k].(string); ok {
				return v
			}
		}
		return "{…}"
	}
	b, err := json.Marshal(item)
	if err != nil {
		return "?"
	}
	return strings.Trim(string(b), `"`)
}

// clip cuts s to n runes with an ellipsis.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
