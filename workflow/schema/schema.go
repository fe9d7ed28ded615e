package schema

import (
	"bytes"
	_ "embed"
)

// URL is the $id of the WorkflowTemplate schema.
const URL = "https://reconciler.dev/schemas/workflowtemplate.schema.json"

//go:embed workflowtemplate.schema.json
var workflowTemplate []byte

// WorkflowTemplate returns a copy of the JSON Schema (draft 2020-12) of a
// WorkflowTemplate document, for editors, API validation and docs.
func WorkflowTemplate() []byte { return bytes.Clone(workflowTemplate) }
