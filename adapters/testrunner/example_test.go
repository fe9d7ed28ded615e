package testrunner_test

import (
	"context"
	"fmt"

	"github.com/reconcilerhq/reconciler/adapters/testrunner"
	"github.com/reconcilerhq/reconciler/ports"
	"github.com/reconcilerhq/reconciler/reconcile/release"
)

func ExampleNew() {
	reports := make(chan ports.JobReport, 1)
	reporter := ports.JobReporterFunc(func(_ context.Context, r ports.JobReport) error {
		reports <- r
		return nil
	})
	agent := testrunner.New(reporter, ports.SystemClock)
	defer agent.Close()

	res, err := agent.Dispatch(context.Background(), ports.JobDispatch{
		Job: release.Job{
			ID:             "job-1",
			JobAgentConfig: map[string]any{"delay": "10ms", "outcome": "failure", "message": "smoke test failed"},
		},
		Agent: release.JobAgent{ID: "agent-1", Name: "tests", Type: testrunner.Type},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.ExternalID, res.Status)

	r := <-reports
	fmt.Println(r.JobID, r.Status, r.Message)
	// Output:
	// test-runner/job-1 inProgress
	// job-1 failure smoke test failed
}
