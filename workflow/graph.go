package workflow

import (
	"container/heap"
	"slices"
	"strings"
)

// maxCycles bounds the dependency cycles a graph records: each is reported
// as a problem, and a template can hold more cycles than tasks.
const maxCycles = 100

// graph is a template's dependency graph over task indices. Building it is
// linear in tasks and dependencies (plus a log factor for the ordering).
type graph struct {
	deps   [][]int // deps[i]: the tasks task i depends on (known, deduplicated)
	order  []int   // a topological order of every task not on a cycle
	pos    []int   // pos[i]: task i's index in order, -1 when on or behind a cycle
	cycles [][]int // each cycle once (at most maxCycles), starting at its lowest index, closed
}

// buildGraph indexes dependencies by name (unknown names are left to
// Validate), finds the elementary cycles met by DFS and a topological
// order, all deterministically in template order.
func buildGraph(tasks []Task) *graph {
	byName := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if _, dup := byName[t.Name]; !dup {
			byName[t.Name] = i
		}
	}
	g := &graph{deps: make([][]int, len(tasks))}
	added := make([]int, len(tasks)) // added[j] == i+1: j is already a dependency of i
	for i, t := range tasks {
		for _, d := range t.Dependencies {
			if j, ok := byName[d]; ok && added[j] != i+1 {
				added[j] = i + 1
				g.deps[i] = append(g.deps[i], j)
			}
		}
	}
	g.findCycles()
	g.topo()
	return g
}

// findCycles runs an iterative DFS (a deep chain must not grow the stack)
// and records the cycle each back edge closes.
func (g *graph) findCycles() {
	const (
		white = iota
		grey
		black
	)
	n := len(g.deps)
	color := make([]uint8, n)
	at := make([]int, n) // at[i]: i's index on the stack while grey
	type frame struct{ node, next int }
	var stack []frame
	seen := map[string]bool{}
	for root := range n {
		if color[root] != white {
			continue
		}
		color[root], at[root] = grey, 0
		stack = append(stack[:0], frame{node: root})
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			i := top.node
			if top.next == len(g.deps[i]) {
				color[i] = black
				stack = stack[:len(stack)-1]
				continue
			}
			j := g.deps[i][top.next]
			top.next++
			switch color[j] {
			case white:
				color[j], at[j] = grey, len(stack)
				stack = append(stack, frame{node: j})
			case grey:
				if len(g.cycles) >= maxCycles {
					continue
				}
				cyc := make([]int, 0, len(stack)-at[j]+1)
				for _, f := range stack[at[j]:] {
					cyc = append(cyc, f.node)
				}
				// rotate to start at the lowest index so each cycle is reported once
				m := slices.Index(cyc, slices.Min(cyc))
				cyc = append(cyc[m:], cyc[:m]...)
				key := fmtInts(cyc)
				if !seen[key] {
					seen[key] = true
					g.cycles = append(g.cycles, append(cyc, cyc[0]))
				}
			}
		}
	}
}

func fmtInts(xs []int) string {
	var b strings.Builder
	for i, x := range xs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(itoa(x))
	}
	return b.String()
}

func itoa(x int) string {
	if x == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for x > 0 {
		i--
		buf[i] = byte('0' + x%10)
		x /= 10
	}
	return string(buf[i:])
}

// intHeap is a min-heap of task indices.
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(a, b int) bool { return h[a] < h[b] }
func (h intHeap) Swap(a, b int)      { h[a], h[b] = h[b], h[a] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topo orders tasks so every task comes after its dependencies (Kahn's
// algorithm, ties broken by template order through a min-heap). Tasks on or
// behind a cycle are left out.
func (g *graph) topo() {
	n := len(g.deps)
	indeg := make([]int, n)
	users := make([][]int, n)
	for i, ds := range g.deps {
		indeg[i] = len(ds)
		for _, d := range ds {
			users[d] = append(users[d], i)
		}
	}
	ready := &intHeap{}
	for i := range n {
		if indeg[i] == 0 {
			*ready = append(*ready, i)
		}
	}
	heap.Init(ready)
	g.pos = make([]int, n)
	for i := range g.pos {
		g.pos[i] = -1
	}
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		g.pos[i] = len(g.order)
		g.order = append(g.order, i)
		for _, u := range users[i] {
			indeg[u]--
			if indeg[u] == 0 {
				heap.Push(ready, u)
			}
		}
	}
}

// ancestorQuery asks whether target is an ancestor of task.
type ancestorQuery struct{ task, target int }

// areAncestors answers each query: is target a task that task depends on,
// directly or transitively? Tasks on or behind a cycle have no answer
// (false). Direct dependencies are answered from the edge lists; the other
// queries share one pass over the topological order per 64 distinct
// targets, each task carrying a 64-bit set of the targets it reaches. The
// cost is O(tasks + edges + queries) when the indirect queries name at most
// 64 distinct targets (the usual "read the outputs of an earlier task"),
// and O((tasks + edges) × targets/64) at worst.
func (g *graph) areAncestors(qs []ancestorQuery) []bool {
	out := make([]bool, len(qs))
	n := len(g.deps)
	// Direct dependencies: mark each asking task's dependencies once.
	byTask := make(map[int][]int, len(qs))
	for k, q := range qs {
		if g.pos[q.task] >= 0 && q.task != q.target {
			byTask[q.task] = append(byTask[q.task], k)
		}
	}
	mark := make([]int, n)
	slot := map[int]int{}
	var targets []int
	var indirect []int
	for task, ks := range byTask {
		for _, d := range g.deps[task] {
			mark[d] = task + 1
		}
		for _, k := range ks {
			t := qs[k].target
			if mark[t] == task+1 {
				out[k] = true
				continue
			}
			if g.pos[t] < 0 || g.pos[t] > g.pos[task] {
				continue // a target later in the order (or on a cycle) is no ancestor
			}
			if _, ok := slot[t]; !ok {
				slot[t] = len(targets)
				targets = append(targets, t)
			}
			indirect = append(indirect, k)
		}
	}
	if len(indirect) == 0 {
		return out
	}
	chunks := make([][]int, (len(targets)+63)/64)
	for _, k := range indirect {
		c := slot[qs[k].target] / 64
		chunks[c] = append(chunks[c], k)
	}
	bits := make([]uint64, n)
	for c, ks := range chunks {
		clear(bits)
		for b, t := range targets[c*64 : min(c*64+64, len(targets))] {
			bits[t] |= 1 << b
		}
		// After this pass bits[i] holds the chunk's targets that are i
		// itself or its ancestors.
		for _, i := range g.order {
			for _, d := range g.deps[i] {
				bits[i] |= bits[d]
			}
		}
		for _, k := range ks {
			out[k] = bits[qs[k].task]&(1<<(slot[qs[k].target]%64)) != 0
		}
	}
	return out
}

// ancestorsOf lists every task that task i depends on, directly or not, in
// index order (a walk of its dependencies).
func (g *graph) ancestorsOf(i int) []int {
	seen := make([]bool, len(g.deps))
	var out []int
	stack := slices.Clone(g.deps[i])
	for len(stack) > 0 {
		j := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[j] {
			continue
		}
		seen[j] = true
		out = append(out, j)
		stack = append(stack, g.deps[j]...)
	}
	slices.Sort(out)
	return out
}
