package strictjson

// Clone deep-copies a decoded JSON value: its objects (map[string]any) and
// arrays ([]any) are copied at every depth, so the copy shares no map or
// slice with v; scalars are returned as they are, and a nil object or
// array stays nil.
func Clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return CloneObject(x)
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Clone(e)
		}
		return out
	}
	return v
}

// CloneObject is Clone of a JSON object; nil stays nil.
func CloneObject(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = Clone(v)
	}
	return out
}
