package verifiers

import (
	"encoding/json"
	"fmt"

	"github.com/reconcilerhq/reconciler/reconcile/release"
)

// configField is the path of a provider config key in error messages.
func configField(key string) string { return release.Field("provider.config", key) }

// jsonCopy returns a deep copy of v made of JSON values only (maps,
// slices, strings, float64, bool, nil), by a round trip through
// encoding/json. A value that does not encode is a *release.FieldError
// naming field.
func jsonCopy(field string, v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &release.FieldError{Field: field, Msg: "not encodable as JSON: " + err.Error(), Err: err}
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", field, err)
	}
	return out, nil
}
