package workflow

import (
	"slices"
	"strings"
)

// graph is a template's dependency graph over task indices.
type graph struct {
	deps   [][]int // deps[i]: the tasks task i depends on (known, deduplicated)
	order  []int   // a topological order of every task not on a cycle
	cycles [][]int // each cycle once, starting at its lowest index, closed
}

// buildGraph indexes dependencies by name (unknown names are left to
// Validate), finds every elementary cycle reachable by DFS and a
// topological order, all deterministically in template order.
func buildGraph(tasks []Task) *graph {
	byName := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if _, dup := byName[t.Name]; !dup {
			byName[t.Name] = i
		}
	}
	g := &graph{deps: make([][]int, len(tasks))}
	for i, t := range tasks {
		for _, d := range t.Dependencies {
			if j, ok := byName[d]; ok && !slices.Contains(g.deps[i], j) {
				g.deps[i] = append(g.deps[i], j)
			}
		}
	}
	g.findCycles()
	g.topo()
	return g
}

func (g *graph) findCycles() {
	const (
		white = iota
		grey
		black
	)
	color := make([]int, len(g.deps))
	var stack []int
	seen := map[string]bool{}
	var visit func(i int)
	visit = func(i int) {
		color[i] = grey
		stack = append(stack, i)
		for _, j := range g.deps[i] {
			switch color[j] {
			case white:
				visit(j)
			case grey:
				at := slices.Index(stack, j)
				cyc := slices.Clone(stack[at:])
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
		stack = stack[:len(stack)-1]
		color[i] = black
	}
	for i := range g.deps {
		if color[i] == white {
			visit(i)
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

// topo orders tasks so every task comes after its dependencies (Kahn's
// algorithm, ties broken by template order). Tasks on or behind a cycle are
// left out.
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
	var ready []int
	for i := 0; i < n; i++ {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		i := ready[0]
		ready = ready[1:]
		g.order = append(g.order, i)
		for _, u := range users[i] {
			indeg[u]--
			if indeg[u] == 0 {
				ready = append(ready, u)
			}
		}
	}
}

// ancestors returns, for every task, the set of tasks it depends on
// directly or transitively (only meaningful without cycles).
func (g *graph) ancestors() [][]bool {
	out := make([][]bool, len(g.deps))
	for _, i := range g.order {
		a := make([]bool, len(g.deps))
		for _, d := range g.deps[i] {
			a[d] = true
			if out[d] != nil {
				for k, v := range out[d] {
					a[k] = a[k] || v
				}
			}
		}
		out[i] = a
	}
	return out
}
