package test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
)

// subtest is one named conformance check, run against a fresh store.
type subtest struct {
	name string
	fn   func(s *store)
}

// groups lists every conformance subtest, by area. Nothing is optional:
// GetVersion's subtest asserts NoImplementation when the backend declares
// it unsupported, and every other subtest runs against every backend.
func groups() []struct {
	name  string
	tests []subtest
} {
	return []struct {
		name  string
		tests []subtest
	}{
		{"File", []subtest{
			{"Create", testCreate},
			{"Update", testUpdate},
			{"UpdateAbsentWithVersion", testUpdateAbsentWithVersion},
			{"Get", testGet},
			{"Delete", testDelete},
			{"List", testList},
			{"ListExcludesLocksAndElections", testListExcludesInternals},
			{"GetVersion", testGetVersion},
			{"ErrorsNamePath", testErrorsNamePath},
			{"ReservedNames", testReservedNames},
			{"FileAndDirectory", testFileAndDirectory},
			{"FileWithChildren", testFileWithChildren},
			{"ReplacedByDirectory", testReplacedByDirectory},
			{"EmptyFileWithFilesBelow", testEmptyFileWithFilesBelow},
			{"GetVersionEdges", testGetVersionEdges},
			{"RootLevel", testRootLevel},
		}},
		{"Directory", []subtest{
			{"ListDir", testListDir},
			{"EmptyDirectoriesDisappear", testEmptyDirsDisappear},
			{"EmptyDirectoryDisappearsAfterLock", testEmptyDirAfterLock},
			{"NeverAFile", testDirectoryNeverAFile},
		}},
		{"Lock", []subtest{
			{"NoNode", testLockNoNode},
			{"FileOrEmptyDirectory", testLockOnFileOrEmpty},
			{"Blocks", testLockBlocks},
			{"Timeout", testLockTimeout},
			{"Interrupted", testLockInterrupted},
			{"WaiterLeavesMidQueue", testLockWaiterLeavesMidQueue},
			{"OutlivesContext", testLockOutlivesContext},
			{"Ephemeral", testLockEphemeral},
			{"TryLock", testTryLock},
			{"LockWithTTL", testLockWithTTL},
			{"LockName", testLockName},
			{"SameConnExclusive", testLockSameConn},
			{"Independent", testLocksIndependent},
			{"CancelAtGrant", testLockCancelAtGrant},
		}},
		{"Watch", []subtest{
			{"Changes", testWatch},
			{"NoNode", testWatchNoNode},
			{"Delete", testWatchDelete},
			{"Cancel", testWatchCancel},
			{"Converges", testWatchConverges},
			{"TwoWatchers", testWatchTwoWatchers},
			{"Revision", testWatchRevision},
			{"VersionsIncrease", testWatchVersionsIncrease},
			{"Churn", testWatchChurn},
			{"CancelPending", testWatchCancelPending},
		}},
		{"WatchRecursive", []subtest{
			{"Events", testWatchRecursive},
			{"PlainPrefix", testWatchRecursivePlainPrefix},
			{"EmptyPrefix", testWatchRecursiveEmpty},
			{"Cancel", testWatchRecursiveCancel},
			{"Converges", testWatchRecursiveConverges},
			{"Recreate", testWatchRecursiveRecreate},
			{"Revision", testWatchRecursiveRevision},
			{"ExcludesLocksAndElections", testWatchRecursiveExcludesInternals},
			{"BaseGoesAndComesBack", testWatchRecursiveBaseGoes},
			{"Churn", testWatchRecursiveChurn},
		}},
		{"Election", []subtest{
			{"InvalidArgument", testElectionInvalid},
			{"Handover", testElectionHandover},
			{"StopWhileWaiting", testElectionStopWhileWaiting},
			{"StopRacesWait", testElectionStopRacesWait},
			{"WaitForNewLeader", testWaitForNewLeader},
			{"WaitForNewLeaderReelected", testWaitForNewLeaderReelected},
			{"OneLeaderAtATime", testElectionOneLeader},
			{"Independent", testElectionsIndependent},
			{"Nested", testNestedElections},
			{"ConcurrentCalls", testElectionConcurrentCalls},
		}},
		{"LeaderValues", []subtest{
			{"Campaign", testCampaignValue},
			{"Proclaim", testProclaim},
			{"ProclaimDeposed", testProclaimDeposed},
			{"CampaignContextEnds", testCampaignContextEnds},
			{"Resign", testResign},
			{"ObserveHandovers", testObserveHandovers},
			{"Resume", testResume},
			{"ResumeEndStop", testResumeEndStop},
			{"ResumeEndResign", testResumeEndResign},
			{"ResumeOwnSession", testResumeOwnSession},
			{"ResumeTwoOnOneSession", testResumeTwoOnOneSession},
			{"ResumeEndCut", testResumeEndCut},
			{"ResumeRecampaign", testResumeRecampaign},
			{"ResumeStopRacesClose", testResumeStopRacesClose},
			{"ResumeEndAfterLoss", testResumeEndAfterLoss},
			{"ObserveOnlyGrantedTerms", testObserveOnlyGrantedTerms},
			{"DirectoriesEphemeral", testElectionDirsEphemeral},
		}},
		{"Semaphore", []subtest{
			{"Limit", testSemaphoreLimit},
			{"SessionLoss", testSemaphoreSessionLoss},
			{"NeverMoreThanLimit", testSemaphoreNeverMore},
			{"UnlockGivenUp", testSemaphoreUnlockGivenUp},
			{"UnlockEndsFenceFirst", testSemaphoreUnlockEndsFenceFirst},
			{"WaiterLosesQueue", testSemaphoreWaiterLosesQueue},
		}},
		{"Close", []subtest{
			{"LaterCallsClosed", testCloseCalls},
			{"ClaimCallsClosed", testCloseClaimCalls},
			{"WatchesInterrupted", testCloseWatches},
			{"ReleasesLocksAndLeadership", testCloseReleases},
			{"InterruptsWaiters", testCloseInterruptsWaiters},
		}},
		{"SessionLoss", []subtest{
			{"Lock", testSessionLossLock},
			{"Leader", testSessionLossLeader},
			{"Waiter", testSessionLossWaiter},
			{"Reuse", testSessionLossReuse},
		}},
		{"Partition", []subtest{
			{"Lock", testPartitionLock},
			{"Leader", testPartitionLeader},
			{"Waiter", testPartitionWaiter},
			{"Reuse", testPartitionReuse},
			{"UnlockGivenUp", testPartitionUnlockGivenUp},
			{"Watches", testPartitionWatches},
		}},
		{"BadInput", []subtest{
			{"Paths", testBadPaths},
			{"ElectionNames", testBadElectionNames},
			{"ValueSize", testValueSize},
			{"Versions", testBadVersions},
			{"CancelledContext", testCancelledContext},
			{"ExpiredContext", testExpiredContext},
			{"DeadContextClaims", testDeadContextClaims},
			{"LongPaths", testLongPaths},
			{"HolderDescriptionSize", testHolderDescriptionSize},
		}},
		{"CheckOrder", []subtest{
			{"OpenConn", testCheckOrderOpen},
			{"ClosedConn", testCheckOrderClosed},
		}},
		{"Concurrency", []subtest{
			{"CompareAndSet", testConcurrentCAS},
			{"CounterNoLostUpdate", testConcurrentCounter},
			{"LockMutualExclusion", testLockMutualExclusion},
			{"Linearizable", testLinearizable},
			{"VersionedDelete", testConcurrentVersionedDelete},
			{"LargeValueCompareAndSet", testLargeValueCAS},
			{"TreeChurn", testTreeChurn},
			{"DeleteFileWithChildren", testDeleteFileWithChildrenRaces},
		}},
		{"Faults", []subtest{
			{"LinearizableReads", testLinearizableUnderFault},
			{"ReadYourWrites", testReadYourWritesUnderFault},
		}},
		{"Fence", []subtest{
			{"Tokens", testFenceTokens},
			{"Terms", testFenceTerms},
			{"Done", testFenceDone},
			{"GuardedRacesUnlock", testFenceGuardedRacesUnlock},
			{"OtherConn", testFenceOtherConn},
			{"TermAcrossValues", testTermGuardsAcrossValues},
			{"TokensUnderFault", testFenceTokensUnderFault},
		}},
		{"Stale", []subtest{
			{"AfterSessionLoss", testStaleAfterSessionLoss},
			{"AfterPartition", testStaleAfterPartition},
			{"Paused", testStalePaused},
		}},
		{"Txn", []subtest{
			{"Ops", testTxnOps},
			{"Failures", testTxnFailures},
			{"StateBefore", testTxnStateBefore},
			{"FileAndDirectory", testTxnFileAndDirectory},
			{"FileAndChild", testTxnFileAndChild},
			{"Shapes", testTxnShapes},
			{"ConditionsInvisible", testTxnConditionsInvisible},
			{"EmptiesLockedDirectory", testTxnEmptiesLockedDirectory},
			{"WriteBelowDeletedFile", testTxnWriteBelowDeletedFile},
			{"BadInput", testTxnBadInput},
			{"Atomicity", testTxnAtomicity},
			{"AtomicityUnderFault", testTxnAtomicityUnderFault},
		}},
		// Last: a backend whose watches lose events stalls the loop of
		// this group for a probe interval per handover, so the subtests
		// that catch such a defect (Txn/Ops, Watch) run first.
		{"Scale", []subtest{
			{"SemaphoreHandoverCostFlat", testSemaphoreHandoverCost},
		}},
	}
}

func run(t *testing.T, newStore func(t *testing.T) (open func() topo.Conn), opts Options, only ...string) {
	require.NotNil(t, newStore, "newStore is required")
	require.NotNil(t, opts.ExpireSession, "Options.ExpireSession is required: a func that drops a Conn's session or lease in the store and returns once the Conn has observed it")
	require.NotNil(t, opts.Partition, "Options.Partition is required: a func that opens a Conn to the subtest's store through a fault (for example a topo/test/faultproxy.Proxy) and returns it with its Cut and Heal funcs")
	require.Positive(t, opts.SessionBound, "Options.SessionBound is required: how long after a partition the store keeps the cut-off Conn's session or lease alive")
	require.NotNil(t, opts.FaultyStore, "Options.FaultyStore is required: a func that starts a store that can suffer a fault (an ensemble or cluster losing a member, a restarted agent) and returns its openers and Fault func")
	for _, name := range only {
		require.Truef(t, slices.ContainsFunc(groups(), func(g struct {
			name  string
			tests []subtest
		}) bool {
			return g.name == name
		}), "no conformance group %q", name)
	}
	for _, g := range groups() {
		if len(only) > 0 && !slices.Contains(only, g.name) {
			continue
		}
		t.Run(g.name, func(t *testing.T) {
			for _, st := range g.tests {
				t.Run(st.name, func(t *testing.T) {
					open := newStore(t)
					require.NotNil(t, open, "newStore returned a nil opener")
					st.fn(&store{t: t, open: open, opts: opts})
				})
			}
		})
	}
}
