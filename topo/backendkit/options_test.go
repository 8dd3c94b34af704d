package backendkit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestOrDefault: a positive value stays, zero and negative ones give the
// default.
func TestOrDefault(t *testing.T) {
	require.Equal(t, 3*time.Second, OrDefault(3*time.Second, time.Minute))
	require.Equal(t, time.Minute, OrDefault(0, time.Minute))
	require.Equal(t, 64, OrDefault(-1, 64))
}

// TestSplitAddresses: trimmed, empty items dropped, nil for none.
func TestSplitAddresses(t *testing.T) {
	require.Equal(t, []string{"a:1", "b:2"}, SplitAddresses(" a:1, ,b:2 ,"))
	require.Nil(t, SplitAddresses(" , "))
}
