package memorytopo_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// waitLimit bounds waits for things that must happen; it is not a timing
// assertion.
const (
	waitLimit = 10 * time.Second
	poll      = time.Millisecond
)

// newConn returns a Conn of f on the store "mem" rooted at /root, closed at
// the end of the test.
func newConn(t *testing.T, f *memorytopo.Factory) *memorytopo.Conn {
	t.Helper()
	c, err := f.NewConn("mem", "/root")
	require.NoError(t, err)
	t.Cleanup(c.Close)
	return c
}

func testCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	t.Cleanup(cancel)
	return ctx
}

func requireCode(t *testing.T, err error, code topo.ErrorCode) {
	t.Helper()
	require.Error(t, err)
	require.Truef(t, topo.IsErrType(err, code), "want %v, got %v", code, err)
}

// checkNoGoroutineLeak fails the test if, once it is done, the number of
// goroutines does not come back to what it was when it was called.
func checkNoGoroutineLeak(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		// A plain poll: require.Eventually would add goroutines of its own.
		deadline := time.Now().Add(waitLimit)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(poll)
		}
		if runtime.NumGoroutine() > before {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines leaked: %d before, %d now:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	})
}
