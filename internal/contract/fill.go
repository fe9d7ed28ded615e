package contract

import (
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
)

// maxFillDepth bounds how deep Fill synthesizes missing required values,
// so a definition with a cycle of required objects still ends.
const maxFillDepth = 24

// Fill completes v, a decoded JSON value a fake means to answer, to an
// instance of schema: every required property v lacks is added with the
// plainest value its schema allows (null where nullable, the first enum
// value, the minimum, "" or a well-formed date-time, URI or email, an
// empty array, an object filled the same way), recursing into the
// properties and items v has. The values v sets are kept as they are, so
// the checker still judges them; Fill only spares a fake from spelling
// out the vendor's many fields its test does not read.
func Fill(schema *openapi3.Schema, v any) any {
	return fill(schema, v, 0)
}

func fill(s *openapi3.Schema, v any, depth int) any {
	if s == nil || depth > maxFillDepth {
		return v
	}
	if v == nil {
		return synth(s, depth)
	}
	for _, sub := range s.AllOf {
		v = fill(sub.Value, v, depth+1)
	}
	if alts := append(append(openapi3.SchemaRefs{}, s.OneOf...), s.AnyOf...); len(alts) > 0 {
		for _, sub := range alts {
			if sub.Value == nil {
				continue
			}
			candidate := fill(sub.Value, strictjson.Clone(v), depth+1)
			if sub.Value.VisitJSON(candidate, openapi3.MultiErrors()) == nil {
				return candidate
			}
		}
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range s.Properties {
			if val, ok := x[k]; ok && sub != nil {
				x[k] = fill(sub.Value, val, depth+1)
			}
		}
		for _, k := range s.Required {
			if _, ok := x[k]; !ok {
				if sub := s.Properties[k]; sub != nil {
					x[k] = synth(sub.Value, depth+1)
				}
			}
		}
		return x
	case []any:
		if s.Items != nil {
			for i := range x {
				x[i] = fill(s.Items.Value, x[i], depth+1)
			}
		}
		return x
	}
	return v
}

// synth is the plainest value schema s allows.
func synth(s *openapi3.Schema, depth int) any {
	if s == nil || depth > maxFillDepth {
		return nil
	}
	switch {
	case s.Nullable || s.Type.Is("null"):
		return nil
	case len(s.Enum) > 0:
		return s.Enum[0]
	case len(s.AllOf) > 0:
		return fill(s, map[string]any{}, depth)
	case len(s.OneOf) > 0:
		return synth(s.OneOf[0].Value, depth+1)
	case len(s.AnyOf) > 0:
		return synth(s.AnyOf[0].Value, depth+1)
	case s.Type.Is("string"):
		switch s.Format {
		case "date-time":
			return "2026-01-01T00:00:00Z"
		case "date":
			return "2026-01-01"
		case "uri", "url":
			return "https://example.invalid/"
		case "email":
			return "fake@example.invalid"
		}
		return ""
	case s.Type.Is("integer"), s.Type.Is("number"):
		if s.Min != nil {
			return *s.Min
		}
		return 0
	case s.Type.Is("boolean"):
		return false
	case s.Type.Is("array"):
		return []any{}
	}
	return fill(s, map[string]any{}, depth) // an object, typed or not
}
