package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	yaml3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/reconcilerhq/reconciler/internal/strictjson"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/revision"
	"github.com/reconcilerhq/reconciler/workflow"
)

// maxDocumentBytes caps a document read by create or edit.
const maxDocumentBytes = 4 << 20

// catalogValidators are the per-kind content checks the catalog service
// runs on every content change, propose and approve: workflow templates
// are loaded and validated by package workflow, policies decoded strictly
// and validated by package policy.
func catalogValidators() map[revision.Kind]func(content []byte) error {
	return map[revision.Kind]func(content []byte) error{
		revision.KindWorkflowTemplate: validateTemplate,
		revision.KindPolicy:           validatePolicy,
	}
}

// validateTemplate reports every problem of a workflow template document.
func validateTemplate(content []byte) error { return checkTemplate(content, "") }

// checkTemplate reports every problem of a workflow template document (YAML
// or JSON, positions in its own lines), and a metadata.name other than name
// when name is set.
func checkTemplate(src []byte, name string) error {
	t, err := workflow.Parse(src)
	if err != nil {
		var ie *workflow.InvalidError
		if errors.As(err, &ie) {
			return problemErrors(ie.Problems)
		}
		return revision.Invalid(fmt.Errorf("content: %w", err))
	}
	ps := workflow.Validate(t)
	if name != "" && t.Metadata.Name != "" && t.Metadata.Name != name {
		ps = append(ps, workflow.Problem{Path: "metadata.name",
			Message: fmt.Sprintf("%q must be the catalog object's name %q", t.Metadata.Name, name)})
	}
	return problemErrors(ps)
}

// problemErrors turns workflow problems into one validation error.
func problemErrors(ps []workflow.Problem) error {
	errs := make([]error, len(ps))
	for i, p := range ps {
		errs[i] = errors.New(p.String())
	}
	return revision.Invalid(errs...)
}

// validatePolicy decodes a policy document strictly and validates it.
func validatePolicy(content []byte) error {
	if _, err := policy.Decode(content); err != nil {
		return revision.Invalid(err)
	}
	return nil
}

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
		err = checkTemplate(src, obj.Name)
	case revision.KindPolicy:
		err = validatePolicy(content)
		var se *strictjson.Error
		if fromYAML && errors.As(err, &se) {
			// The position is in the converted JSON, not the user's file.
			se.Line, se.Column = 0, 0
		}
	}
	if err != nil {
		return fail(err)
	}
	return content, nil
}

// readFile reads file, or stdin for "-", up to maxDocumentBytes.
func readFile(cmd *cobra.Command, file string) ([]byte, error) {
	var r io.Reader
	if file == "-" {
		r = cmd.InOrStdin()
	} else {
		f, err := os.Open(file)
		if err != nil {
			return nil, usagef("-f: %v", err)
		}
		defer f.Close()
		r = f
	}
	src, err := io.ReadAll(io.LimitReader(r, maxDocumentBytes+1))
	if err != nil {
		return nil, usagef("-f %s: %v", displayName(file), err)
	}
	if len(src) > maxDocumentBytes {
		return nil, usagef("-f %s: larger than %d bytes", displayName(file), maxDocumentBytes)
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

// yamlToJSON converts one YAML document holding a mapping to JSON; syntax
// errors name their line.
func yamlToJSON(src []byte) (json.RawMessage, error) {
	dec := yaml3.NewDecoder(bytes.NewReader(src))
	docs := 0
	for {
		var n yaml3.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, revision.Invalid(fmt.Errorf("content: syntax error: %s", strings.TrimPrefix(err.Error(), "yaml: ")))
		}
		docs++
		if n.Kind == yaml3.DocumentNode && len(n.Content) == 1 && n.Content[0].Kind != yaml3.MappingNode {
			return nil, revision.Invalid(fmt.Errorf("content: must be a mapping (an object), line %d", n.Content[0].Line))
		}
	}
	if docs != 1 {
		return nil, revision.Invalid(fmt.Errorf("content: want exactly one YAML document, got %d", docs))
	}
	j, err := yaml.YAMLToJSONStrict(src)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
		return nil, revision.Invalid(fmt.Errorf("content: %s", strings.TrimPrefix(msg, "yaml: ")))
	}
	if err := ports.ValidateRevisionContent(j); err != nil {
		return nil, err
	}
	return j, nil
}
