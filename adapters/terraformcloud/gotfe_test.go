package terraformcloud

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-tfe"
	"github.com/hashicorp/jsonapi"
	"github.com/stretchr/testify/require"

	"github.com/reconcilerhq/reconciler/internal/contract"
)

// HCP Terraform publishes no OpenAPI document; its definition in code is
// go-tfe, HashiCorp's own client. The fake's exchanges are checked
// against go-tfe's types: each run it answers decodes as a tfe.Run (a
// list as []*tfe.Run) with only attribute names go-tfe knows and a status
// go-tfe names; each run the agent creates decodes as
// tfe.RunCreateOptions with only its attributes; a cancel or discard body
// is tfe.RunCancelOptions / RunDiscardOptions ({"comment"}).

// runStatuses are the run statuses go-tfe names.
var runStatuses = []tfe.RunStatus{tfe.RunApplied, tfe.RunApplying, tfe.RunApplyQueued, tfe.RunCanceled, tfe.RunConfirmed,
	tfe.RunCostEstimated, tfe.RunCostEstimating, tfe.RunDiscarded, tfe.RunErrored, tfe.RunFetching, tfe.RunFetchingCompleted,
	tfe.RunPending, tfe.RunPlanned, tfe.RunPlannedAndFinished, tfe.RunPlannedAndSaved, tfe.RunPlanning, tfe.RunPlanQueued,
	tfe.RunPolicyChecked, tfe.RunPolicyChecking, tfe.RunPolicyOverride, tfe.RunPolicySoftFailed, tfe.RunPostPlanAwaitingDecision,
	tfe.RunPostPlanCompleted, tfe.RunPostPlanRunning, tfe.RunPostApplyRunning, tfe.RunPostApplyCompleted, tfe.RunPreApplyRunning,
	tfe.RunPreApplyCompleted, tfe.RunPrePlanCompleted, tfe.RunPrePlanRunning, tfe.RunQueuing, tfe.RunQueuingApply}

// jsonapiAttrs are the attribute names of a go-tfe type's jsonapi tags.
func jsonapiAttrs(v any) map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("jsonapi"); strings.HasPrefix(tag, "attr,") {
			out[strings.Split(tag, ",")[1]] = true
		}
	}
	return out
}

// unknownKeys are the keys of m that known lacks, sorted.
func unknownKeys(m map[string]any, known map[string]bool) []string {
	var out []string
	for k := range m {
		if !known[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// checkRun checks one run resource object against go-tfe.
func checkRun(obj map[string]any) error {
	attrs, _ := obj["attributes"].(map[string]any)
	if bad := unknownKeys(attrs, jsonapiAttrs(tfe.Run{})); len(bad) > 0 {
		return fmt.Errorf("run attributes go-tfe does not know: %v", bad)
	}
	if actions, ok := attrs["actions"].(map[string]any); ok {
		if bad := unknownKeys(actions, jsonapiAttrs(tfe.RunActions{})); len(bad) > 0 {
			return fmt.Errorf("run actions go-tfe does not know: %v", bad)
		}
	}
	if st, _ := attrs["status"].(string); !slices.Contains(runStatuses, tfe.RunStatus(st)) {
		return fmt.Errorf("run status %q is none go-tfe names", st)
	}
	return nil
}

// checkTFEExchange checks one request and its answer against go-tfe.
func checkTFEExchange(r *http.Request, reqBody []byte, status int, resp []byte) error {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v2/runs":
		var opts tfe.RunCreateOptions
		if err := jsonapi.UnmarshalPayload(bytes.NewReader(reqBody), &opts); err != nil {
			return fmt.Errorf("create run: the body is no tfe.RunCreateOptions: %w", err)
		}
		var doc struct {
			Data struct {
				Type          string                    `json:"type"`
				Attributes    map[string]any            `json:"attributes"`
				Relationships map[string]map[string]any `json:"relationships"`
			} `json:"data"`
		}
		if err := json.Unmarshal(reqBody, &doc); err != nil {
			return err
		}
		if bad := unknownKeys(doc.Data.Attributes, jsonapiAttrs(tfe.RunCreateOptions{})); len(bad) > 0 {
			return fmt.Errorf("create run: attributes go-tfe does not send: %v", bad)
		}
		ws, _ := doc.Data.Relationships["workspace"]["data"].(map[string]any)
		if doc.Data.Type != "runs" || ws["type"] != "workspaces" || ws["id"] == "" {
			return fmt.Errorf("create run: want type runs and a workspaces relationship, got %s", reqBody)
		}
	case r.Method == http.MethodPost && strings.Contains(r.URL.Path, "/actions/"):
		var body map[string]any
		if err := json.Unmarshal(reqBody, &body); err != nil {
			return fmt.Errorf("run action: %w", err)
		}
		if bad := unknownKeys(body, map[string]bool{"comment": true}); len(bad) > 0 {
			return fmt.Errorf("run action: keys tfe.RunCancelOptions lacks: %v", bad)
		}
	}
	if status/100 != 2 || len(resp) == 0 {
		return nil
	}
	var doc struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(resp, &doc); err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if bytes.HasPrefix(bytes.TrimSpace(doc.Data), []byte("[")) {
		if _, err := jsonapi.UnmarshalManyPayload(bytes.NewReader(resp), reflect.TypeOf(&tfe.Run{})); err != nil {
			return fmt.Errorf("answer: no list of tfe.Run: %w", err)
		}
		var list []map[string]any
		_ = json.Unmarshal(doc.Data, &list)
		for _, obj := range list {
			if err := checkRun(obj); err != nil {
				return err
			}
		}
		return nil
	}
	if err := jsonapi.UnmarshalPayload(bytes.NewReader(resp), &tfe.Run{}); err != nil {
		return fmt.Errorf("answer: no tfe.Run: %w", err)
	}
	var obj map[string]any
	_ = json.Unmarshal(doc.Data, &obj)
	return checkRun(obj)
}

// checkedByGoTFE wraps the fake's handler with checkTFEExchange; a
// violation fails t.
func checkedByGoTFE(t *testing.T, h http.HandlerFunc) http.HandlerFunc {
	return contract.Intercept(h, func(r *http.Request, body []byte, rec *httptest.ResponseRecorder) {
		if rec.Header().Get(contract.OffContract) != "" {
			return
		}
		if err := checkTFEExchange(r, body, rec.Code, rec.Body.Bytes()); err != nil {
			t.Errorf("go-tfe contract: %s %s: %v", r.Method, r.URL.Path, err)
		}
	}).ServeHTTP
}

// TestGoTFEContractCatchesAnOffDefinitionFake: an answer with an
// attribute go-tfe does not know, a status it does not name, or a create
// body with an attribute it does not send fails the check.
func TestGoTFEContractCatchesAnOffDefinitionFake(t *testing.T) {
	t.Parallel()
	get := httptest.NewRequest(http.MethodGet, "/api/v2/runs/run-1", nil)
	ok := `{"data":{"id":"run-1","type":"runs","attributes":{"status":"applied","has-changes":true,"actions":{"is-cancelable":false}}}}`
	require.NoError(t, checkTFEExchange(get, nil, 200, []byte(ok)))
	require.ErrorContains(t, checkTFEExchange(get, nil, 200, []byte(strings.Replace(ok, "has-changes", "has_changes", 1))), "has_changes")
	require.ErrorContains(t, checkTFEExchange(get, nil, 200, []byte(strings.Replace(ok, "applied", "force_canceled", 1))), "force_canceled")
	require.ErrorContains(t, checkTFEExchange(get, nil, 200, []byte(strings.Replace(ok, "is-cancelable", "cancelable", 1))), "cancelable")
	post := httptest.NewRequest(http.MethodPost, "/api/v2/runs", nil)
	create := `{"data":{"type":"runs","attributes":{"message":"m","autoApply":true},"relationships":{"workspace":{"data":{"type":"workspaces","id":"ws-1"}}}}}`
	require.ErrorContains(t, checkTFEExchange(post, []byte(create), 201, []byte(ok)), "autoApply")
}
