package topoctl

import (
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lock waits for a held lock without bound unless --timeout was given
// (as a flag, its variable or in the config file), which then bounds the
// wait as before.
func TestLockWait(t *testing.T) {
	t.Parallel()
	wait := func(args []string, env map[string]string) time.Duration {
		s := &settings{getenv: func(k string) string { return env[k] }}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		s.addFlags(fs)
		fs.StringVar(&s.configFile, "config", "", "")
		require.NoError(t, fs.Parse(args))
		require.NoError(t, s.resolve(fs))
		return s.lockWait()
	}
	assert.Zero(t, wait(nil, nil), "no --timeout: no bound")
	assert.Equal(t, 2*time.Second, wait([]string{"--timeout", "2s"}, nil))
	assert.Equal(t, 3*time.Second, wait(nil, map[string]string{envTimeout: "3s"}))
	assert.Zero(t, wait([]string{"--timeout", "0"}, nil))
}

// Without --timeout a second lock keeps waiting for the holder instead of
// failing after the store calls' bound; it gets the lock once the holder
// lets go.
func TestLockWaitsForHolder(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "ks/Keyspace", "k")
	holder := tg.start(t, "lock", "ks")
	holder.waitOutput(t, "holding the lock")
	// A short --timeout (given) still bounds the wait, and fails.
	tg.fails(t, 1, []string{"Timeout"}, "--timeout", "200ms", "lock", "ks", "--", "true")
	waiter := tg.start(t, "lock", "ks", "--", "echo", "got it")
	assert.Equal(t, 0, holder.stop(t))
	assert.Equal(t, 0, waiter.wait(t))
	assert.Equal(t, "got it\n", waiter.stdout.String())
}
