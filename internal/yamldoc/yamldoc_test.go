package yamldoc

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOne(t *testing.T) {
	n, err := One([]byte("a: 1\n"))
	require.NoError(t, err)
	require.Len(t, n.Content, 1)

	_, err = One([]byte("a: 1\n---\nb: 2\n"))
	var ce *CountError
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, 2, ce.Count)
	require.Equal(t, 3, ce.Line)
	require.EqualError(t, err, "want exactly one YAML document, got 2 (the second starts at line 3)")

	_, err = One([]byte("# only a comment\n"))
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, 0, ce.Count)

	_, err = One([]byte("a: [1\n"))
	require.Error(t, err)
	require.False(t, errors.As(err, &ce))
}
