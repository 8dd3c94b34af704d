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
