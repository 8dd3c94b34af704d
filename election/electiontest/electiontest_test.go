package electiontest_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/election/electiontest"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// envChild names the harness run of a child process of
// TestMissingInputsFail: "empty" runs the harness with no Options at all.
const envChild = "ELECTIONTEST_TEST_CHILD"

// TestMissingInputsFail: the harness never skips. Run with no
// LoseMastership, Partition or SessionBound (in a child process, since the
// failures cannot be contained in this one), every subtest that needs one
// fails, saying what to provide, and nothing is skipped; the subtests that
// need none pass.
func TestMissingInputsFail(t *testing.T) {
	if os.Getenv(envChild) == "empty" {
		mf := memorytopo.NewFactory()
		electiontest.Run(t, func(t *testing.T, id string) election.Factory {
			conn, err := mf.Create(topo.GlobalCell, "electiontest", "/global")
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			f, err := election.NewTopoFactory(conn, id)
			require.NoError(t, err)
			return f
		}, electiontest.Options{Timeout: time.Minute})
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestMissingInputsFail$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=empty")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAsf(t, err, &exit, "the harness with missing inputs must fail: %s", out)
	log := string(out)
	require.NotContains(t, log, "--- SKIP", "nothing is skipped")
	for _, sub := range []string{"StoreSideLoss", "TermEndsWithStoreSideLoss"} {
		require.Regexpf(t, regexp.MustCompile(`--- FAIL: TestMissingInputsFail/`+sub+` `), log, "%s fails without LoseMastership", sub)
	}
	require.Regexp(t, `--- FAIL: TestMissingInputsFail/PartitionedMasterStepsDown `, log, "the partition subtest fails without Partition")
	require.Contains(t, log, "electiontest.Options.LoseMastership is required")
	require.Contains(t, log, "electiontest.Options.Partition is required")
	for _, sub := range []string{"AwaitMakesMaster", "NeverTwoMasters", "TermFencingTokens"} {
		require.Regexpf(t, `--- PASS: TestMissingInputsFail/`+sub+` `, log, "%s needs no optional input", sub)
	}
}

// TestMissingSessionBoundFails: with Partition given but no SessionBound,
// the partition subtest fails naming SessionBound.
func TestMissingSessionBoundFails(t *testing.T) {
	if os.Getenv(envChild) == "no-bound" {
		mf := memorytopo.NewFactory()
		factory := func(t *testing.T, conn topo.Conn, id string) election.Factory {
			f, err := election.NewTopoFactory(conn, id)
			require.NoError(t, err)
			return f
		}
		electiontest.Run(t, func(t *testing.T, id string) election.Factory {
			conn, err := mf.Create(topo.GlobalCell, "electiontest", "/global")
			require.NoError(t, err)
			t.Cleanup(conn.Close)
			return factory(t, conn, id)
		}, electiontest.Options{
			Partition: func(t *testing.T, id string) electiontest.Partitioned {
				conn, err := mf.NewConn("electiontest", "/global")
				require.NoError(t, err)
				t.Cleanup(conn.Close)
				return electiontest.Partitioned{Factory: factory(t, conn, id), Cut: conn.Partition, Heal: conn.Heal}
			},
		})
		return
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestMissingSessionBoundFails$/^PartitionedMasterStepsDown$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), envChild+"=no-bound")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAsf(t, err, &exit, "the harness without SessionBound must fail: %s", out)
	require.Contains(t, string(out), "electiontest.Options.SessionBound is required")
	require.NotContains(t, string(out), "--- SKIP")
}
