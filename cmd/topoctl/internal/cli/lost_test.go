package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A lock deleted behind the holder's back: lock stops the command and
// fails with LockLost.
func TestLockLost(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	tg.ok(t, "put", "ks/Keyspace", "k")
	holder := tg.start(t, "lock", "--check-interval", "20ms", "ks", "--", "sh", "-c", "echo held; exec sleep 600")
	holder.waitOutput(t, "held\n")
	entries := strings.Fields(tg.ok(t, "ls", "ks/locks"))
	require.Len(t, entries, 1)
	tg.ok(t, "rm", "ks/locks/"+entries[0])
	code := holder.wait(t)
	assert.Equal(t, 143, code, holder.stderr.String())
	assert.Contains(t, holder.stderr.String(), "LockLost")
	assert.Contains(t, holder.stderr.String(), "was lost while the command ran")
}

// An election entry deleted behind the leader's back: elect prints "lost"
// and fails with LockLost.
func TestElectLost(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	a := tg.start(t, "elect", "primary", "--id", "alpha")
	a.waitOutput(t, "elected alpha\n")
	entries := strings.Fields(tg.ok(t, "ls", "elections/primary"))
	require.Len(t, entries, 1)
	tg.ok(t, "rm", "elections/primary/"+entries[0])
	assert.Equal(t, 1, a.wait(t), a.stderr.String())
	assert.Contains(t, a.stdout.String(), "lost alpha\n")
	assert.Contains(t, a.stderr.String(), "LockLost")
}
