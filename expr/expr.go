package expr

import (
	"errors"
	"fmt"
	"reflect"
	"strings"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/ext"
	lru "github.com/hashicorp/golang-lru/v2"
)

// CacheSize bounds how many compiled programs one Env keeps. Expressions
// come from stored objects and templates, so their number is open-ended;
// the program compiled longest ago is dropped first and compiled again when
// it is next needed. A lookup takes only the cache's read lock (it does not
// reorder entries), so concurrent evaluations do not queue on the cache.
const CacheSize = 1024

// Error describes an expression that does not compile or evaluate. Line and
// Column are 1-based and zero when unknown.
type Error struct {
	Expr    string
	Line    int
	Column  int
	Message string
}

// Error renders the problem with its position.
func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("expression %q: line %d, column %d: %s", e.Expr, e.Line, e.Column, e.Message)
	}
	return fmt.Sprintf("expression %q: %s", e.Expr, e.Message)
}

// Env is a CEL environment with a fixed set of top-level variables, each of
// dynamic type (maps, lists and scalars decoded from JSON). It caches up to
// CacheSize compiled programs by source and is safe for concurrent use.
type Env struct {
	env   *cel.Env
	vars  []string
	cache *lru.Cache[string, *Program]
}

// NewEnv builds an environment in which the named variables are declared.
func NewEnv(vars ...string) (*Env, error) {
	opts := []cel.EnvOption{ext.Strings(), ext.Math(), ext.Lists(), ext.Encoders()}
	for _, v := range vars {
		opts = append(opts, cel.Variable(v, cel.DynType))
	}
	env, err := cel.NewEnv(opts...)
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	cache, err := lru.New[string, *Program](CacheSize)
	if err != nil {
		return nil, fmt.Errorf("cel program cache: %w", err)
	}
	return &Env{env: env, vars: append([]string(nil), vars...), cache: cache}, nil
}

// MustEnv is NewEnv for package-level environments built from constant
// variable names; it panics only on a programming error.
func MustEnv(vars ...string) *Env {
	e, err := NewEnv(vars...)
	if err != nil {
		panic(err)
	}
	return e
}

// Vars lists the declared variable names.
func (e *Env) Vars() []string { return append([]string(nil), e.vars...) }

// Program is a compiled expression, safe for concurrent evaluation.
type Program struct {
	src string
	prg cel.Program
	out *cel.Type
	// reads are the identifiers the checked expression references.
	reads map[string]bool
}

// Reads reports whether the expression may reference variable name (or a
// field of it): when it does not, its value cannot depend on name's. (A
// comprehension's own variable counts as a reference too.)
func (p *Program) Reads(name string) bool { return p.reads[name] }

// Source returns the expression text.
func (p *Program) Source() string { return p.src }

// Compile parses and type-checks src, returning the cached program when the
// same source is still in the cache. Errors are *Error.
func (e *Env) Compile(src string) (*Program, error) {
	if p, ok := e.cache.Peek(src); ok {
		return p, nil
	}
	if src == "" {
		return nil, &Error{Expr: src, Message: "empty expression"}
	}
	ast, iss := e.env.Compile(src)
	if iss != nil && iss.Err() != nil {
		errs := iss.Errors()
		if len(errs) > 0 {
			first := errs[0]
			return nil, &Error{Expr: src, Line: first.Location.Line(), Column: first.Location.Column() + 1, Message: first.Message}
		}
		return nil, &Error{Expr: src, Message: iss.Err().Error()}
	}
	prg, err := e.env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(1_000_000))
	if err != nil {
		return nil, &Error{Expr: src, Message: err.Error()}
	}
	p := &Program{src: src, prg: prg, out: ast.OutputType(), reads: map[string]bool{}}
	for _, r := range ast.NativeRep().ReferenceMap() {
		if r != nil && r.Name != "" && len(r.OverloadIDs) == 0 {
			// An identifier: a variable, or a qualified name that starts
			// with one.
			name, _, _ := strings.Cut(r.Name, ".")
			p.reads[name] = true
		}
	}
	if prev, ok, _ := e.cache.PeekOrAdd(src, p); ok {
		return prev, nil // a concurrent Compile stored it first
	}
	return p, nil
}

// CompileBool is Compile for a condition: the expression's checked type
// must be bool. A dynamic result (a bare field such as event.ok) is refused
// too, since nothing proves it is a boolean; compare it instead
// (event.ok == true). Errors are *Error.
func (e *Env) CompileBool(src string) (*Program, error) {
	p, err := e.Compile(src)
	if err != nil {
		return nil, err
	}
	if !p.out.IsExactType(cel.BoolType) {
		return nil, &Error{Expr: src, Line: 1, Column: 1, Message: fmt.Sprintf("result is %s, want bool", p.out)}
	}
	return p, nil
}

// MayBeBool reports whether the type checker leaves the result possibly a
// boolean: its type is bool, or dynamic (it reads a variable's field).
func (p *Program) MayBeBool() bool {
	return p.out == nil || p.out.IsExactType(types.BoolType) || p.out.IsExactType(types.DynType)
}

// ResultType names the checked type of the result ("bool", "string", "dyn").
func (p *Program) ResultType() string {
	if p.out == nil {
		return "dyn"
	}
	return p.out.String()
}

// Check compiles src and reports only whether it is valid.
func (e *Env) Check(src string) error {
	_, err := e.Compile(src)
	return err
}

// Eval evaluates the program over vars and returns the result as a native Go
// value (bool, int64, uint64, float64, string, []any, map[string]any, nil).
func (p *Program) Eval(vars map[string]any) (any, error) {
	v, err := p.eval(vars)
	if err != nil {
		return nil, err
	}
	return native(v)
}

// EvalBool evaluates the program and requires a boolean result.
func (p *Program) EvalBool(vars map[string]any) (bool, error) {
	v, err := p.eval(vars)
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, &Error{Expr: p.src, Message: fmt.Sprintf("result is %s, want bool", v.Type().TypeName())}
	}
	return bool(b), nil
}

func (p *Program) eval(vars map[string]any) (v ref.Val, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &Error{Expr: p.src, Message: fmt.Sprintf("evaluation failed: %v", r)}
		}
	}()
	out, _, err := p.prg.Eval(vars)
	if err != nil {
		return nil, &Error{Expr: p.src, Message: err.Error()}
	}
	return out, nil
}

var anyType = reflect.TypeOf((*any)(nil)).Elem()

// native converts a CEL value into plain Go values.
func native(v ref.Val) (any, error) {
	switch t := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool, types.Int, types.Uint, types.Double, types.String, types.Bytes:
		return t.Value(), nil
	}
	if out, err := v.ConvertToNative(reflect.TypeOf(map[string]any{})); err == nil {
		return out, nil
	}
	if out, err := v.ConvertToNative(reflect.TypeOf([]any{})); err == nil {
		return out, nil
	}
	if out, err := v.ConvertToNative(anyType); err == nil {
		return out, nil
	}
	return v.Value(), nil
}

// IsError reports whether err came from an expression.
func IsError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}
