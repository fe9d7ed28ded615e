package benchstat

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestQuantile(t *testing.T) {
	t.Parallel()
	require.Zero(t, Quantile(nil, 0.99))
	var ds []time.Duration
	for i := 1; i <= 100; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	require.Equal(t, 51*time.Millisecond, Quantile(ds, 0.50))
	require.Equal(t, 100*time.Millisecond, Quantile(ds, 0.99))
	require.Equal(t, 100*time.Millisecond, Quantile(ds, 1))
	require.Equal(t, time.Millisecond, Quantile(ds, 0))
	require.Equal(t, 7*time.Second, Quantile([]time.Duration{7 * time.Second}, 0.99))
}
