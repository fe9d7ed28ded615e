package workflow

import (
	"fmt"
	"sort"

	"github.com/reconcilerhq/reconciler/expr"
)

// Inputs are the candidate objects a matrix source selects from, as maps
// (the caller reads them from its store). Resources and environments are
// matched by selector, release targets by deployment.
type Inputs struct {
	Resources      []map[string]any
	Environments   []map[string]any
	ReleaseTargets []map[string]any
}

// ItemKey is the field under which a selecting source kind wraps each
// candidate: an item of a resource source is {resource: {...}}, read as
// matrix.resource.name. A list source's items are the listed values
// themselves; its key, "item", is the field every item is read under whole
// (MatrixItemField).
func ItemKey(kind SourceKind) string {
	if kind == SourceList {
		return "item"
	}
	return string(kind)
}

var selectorEnvs = map[SourceKind]*expr.Env{
	SourceResource:    expr.MustEnv(ItemKey(SourceResource)),
	SourceEnvironment: expr.MustEnv(ItemKey(SourceEnvironment)),
}

// MatrixItemField is the matrix field that holds the whole matrix item, for
// every source kind (a scalar list item is read only this way).
const MatrixItemField = "item"

// matrixBuiltins are the matrix fields a task reads besides the item's own;
// they win over an item field of the same name (still readable through
// matrix.item).
var matrixBuiltins = map[string]bool{"index": true, "length": true, "isFirst": true, "isLast": true, MatrixItemField: true}

// ExpandMatrix evaluates a matrix parameter's source over the candidates and
// returns its items (the TaskRuns' matrixItem): each candidate of a
// resource, environment or releaseTarget source wrapped under ItemKey of the
// kind ({resource: {...}}), each listed value of a list source as it is
// written. An object item's own fields are read as matrix.<field>. Order is
// deterministic: resources and environments sorted by their "id" (a stable
// sort: candidates without an id come first, in input order), release
// targets and list items in input order.
func ExpandMatrix(p *Parameter, in Inputs) ([]any, error) {
	if p.Type != TypeMatrix || p.Source == nil {
		return nil, fmt.Errorf("parameter %q: not a matrix parameter with a source", p.Name)
	}
	src := p.Source
	key := ItemKey(src.Kind)
	var picked []map[string]any
	switch src.Kind {
	case SourceResource, SourceEnvironment:
		cands := in.Resources
		if src.Kind == SourceEnvironment {
			cands = in.Environments
		}
		prog, err := compileSelector(src)
		if err != nil {
			return nil, fmt.Errorf("parameter %q: selector: %w", p.Name, err)
		}
		for i, c := range cands {
			ok, err := prog.EvalBool(map[string]any{key: c})
			if err != nil {
				return nil, fmt.Errorf("parameter %q: selector on %s %s: %w", p.Name, key, candidateName(c, i), err)
			}
			if ok {
				picked = append(picked, c)
			}
		}
		sort.SliceStable(picked, func(a, b int) bool { return idOf(picked[a]) < idOf(picked[b]) })
	case SourceReleaseTarget:
		if src.Deployment == "" {
			return nil, fmt.Errorf("parameter %q: a releaseTarget source needs a deployment", p.Name)
		}
		for _, rt := range in.ReleaseTargets {
			if targetsDeployment(rt, src.Deployment) {
				picked = append(picked, rt)
			}
		}
	case SourceList:
		out := make([]any, len(src.Items))
		for i, it := range src.Items {
			out[i] = Normalize(it)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("parameter %q: unknown source kind %q", p.Name, src.Kind)
	}
	out := make([]any, len(picked))
	for i, c := range picked {
		out[i] = map[string]any{key: c}
	}
	return out, nil
}

// compileSelector compiles a resource or environment source's selector.
func compileSelector(src *MatrixSource) (*expr.Program, error) {
	env := selectorEnvs[src.Kind]
	if src.Selector == nil {
		return nil, fmt.Errorf("a %s source needs a selector", src.Kind)
	}
	code, ps := src.Selector.CEL(ItemKey(src.Kind))
	if len(ps) > 0 {
		return nil, &InvalidError{Problems: ps}
	}
	return env.Compile(code)
}

func idOf(m map[string]any) string {
	s, _ := m["id"].(string)
	return s
}

func candidateName(m map[string]any, i int) string {
	for _, k := range []string{"id", "identifier", "name"} {
		if s, ok := m[k].(string); ok && s != "" {
			return fmt.Sprintf("%q", s)
		}
	}
	return fmt.Sprintf("#%d", i)
}

// targetsDeployment reports whether a release target belongs to the
// deployment, matched on deploymentId, deployment.id or deployment.name.
func targetsDeployment(rt map[string]any, dep string) bool {
	if s, _ := rt["deploymentId"].(string); s == dep {
		return true
	}
	if d, ok := rt["deployment"].(map[string]any); ok {
		if s, _ := d["id"].(string); s == dep {
			return true
		}
		if s, _ := d["name"].(string); s == dep {
			return true
		}
	}
	return false
}
