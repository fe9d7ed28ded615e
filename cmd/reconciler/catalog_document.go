package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/reconcilerhq/reconciler/engine/catalog"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/spf13/cobra"
)

// catalogValidators are the per-kind content checks the catalog service
// runs on every content change, propose and approve: the service's
// defaults, workflow's and policy's own validation.
func catalogValidators() map[revision.Kind]func(content []byte) error {
	return catalog.DefaultValidators()
}

// validatePolicy decodes a policy document strictly and validates it.
func validatePolicy(content []byte) error { return catalog.ValidatePolicy(content) }

// readDocument reads -f FILE (- for stdin) for obj and returns the JSON to
// store: a JSON document as given, a YAML one converted. The document is
// checked here, against the user's own lines, before the database is
// opened; the service checks the stored JSON again.
func readDocument(cmd *cobra.Command, obj revision.Object, file string) (json.RawMessage, error) {
	src, err := readFile(cmd, file)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (json.RawMessage, error) {
		return nil, fmt.Errorf("%s %s: %s: %w", cmd.Name(), obj, displayName(file), err)
	}
	trimmed := bytes.TrimSpace(src)
	if len(trimmed) == 0 {
		return fail(revision.Invalid(errors.New("content: the document is empty")))
	}
	content, fromYAML := json.RawMessage(trimmed), false
	if trimmed[0] == '{' || trimmed[0] == '[' {
		if err := ports.ValidateRevisionContent(content); err != nil {
			return fail(err)
		}
	} else {
		if content, err = yamlToJSON(src); err != nil {
			return fail(err)
		}
		fromYAML = true
	}
	switch obj.Kind {
	case revision.KindWorkflowTemplate:
		err = catalog.CheckWorkflowTemplate(src, obj.Name)
	case revision.KindPolicy:
		// JSON is checked as the user wrote it, so strictjson's positions
		// are the file's; YAML as converted, its positions placed again.
		checked := content
		if !fromYAML {
			checked = src
		}
		err = placePolicyProblem(src, fromYAML, validatePolicy(checked))
	}
	if err != nil {
		return fail(err)
	}
	return content, nil
}

// readFile reads -f FILE (- for stdin), capped like every input.
func readFile(cmd *cobra.Command, file string) ([]byte, error) {
	src, err := readInput(cmd.InOrStdin(), file)
	if err != nil {
		return nil, usagef("-f %s: %v", displayName(file), err)
	}
	return src, nil
}

// displayName names the input in messages.
func displayName(file string) string {
	if file == "-" {
		return "stdin"
	}
	return file
}
