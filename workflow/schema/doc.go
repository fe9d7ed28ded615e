// Package schema embeds the JSON Schema of a WorkflowTemplate document.
//
// Invariant: the schema accepts every template in testdata/workflows and
// refuses unknown fields everywhere the Go decoder does (additionalProperties
// is false on every object the template types declare); its test keeps the
// two in step.
package schema
