package verifiers_test

import (
	"context"
	"fmt"

	"github.com/reconcilerhq/reconciler/adapters/verifiers"
	"github.com/reconcilerhq/reconciler/policy"
	"github.com/reconcilerhq/reconciler/ports"
)

func ExampleScripted() {
	metric := policy.MetricSpec{
		Name: "error-rate",
		Provider: policy.Provider{Type: verifiers.ScriptedType, Config: map[string]any{
			"results": []any{
				map[string]any{"rate": 0.2},
				map[string]any{"error": "datadog unreachable"},
				map[string]any{"rate": 0.01},
			},
		}},
		IntervalSeconds:  30,
		Count:            4,
		SuccessCondition: "result.rate < 0.05",
	}
	var v verifiers.Scripted
	for attempt := 1; attempt <= metric.Count; attempt++ {
		result, err := v.Measure(context.Background(), ports.MeasureRequest{Metric: metric, Attempt: attempt})
		if err != nil {
			fmt.Println(attempt, "error:", err)
			continue
		}
		fmt.Println(attempt, result)
	}
	// Output:
	// 1 map[rate:0.2]
	// 2 error: scripted: metric "error-rate": attempt 2: datadog unreachable
	// 3 map[rate:0.01]
	// 4 map[rate:0.01]
}
