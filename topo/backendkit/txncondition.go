package backendkit

import "github.com/topokit/topokit/topo"

// TxnConditioned reports whether op has a condition of its own, explicit
// (the If kinds) or implied by a write: every op but an UpdateOp without
// a version, which writes whatever the state. It returns no error and is
// safe for concurrent use.
func TxnConditioned(op TxnOp) bool {
	return op.Kind != topo.TxnUpdate || op.Version != AnyVersion
}

// TxnConditionCode is the code op fails with when its condition does not
// hold, as far as its kind tells: NodeExists for IfAbsent and CreateOp,
// NoNode for IfPresent and a DeleteOp without version, LockLost for
// IfHeld, BadVersion for the ops at a version (which fail with NoNode
// instead on an absent path, see TxnConditionFails). A backend that does
// not know the state the condition failed on (etcd2topo after a
// compaction) reports this code. Safe for concurrent use.
func TxnConditionCode(op TxnOp) topo.ErrorCode {
	switch op.Kind {
	case topo.TxnIfAbsent, topo.TxnCreate:
		return topo.NodeExists
	case topo.TxnIfPresent:
		return topo.NoNode
	case topo.TxnIfHeld:
		return topo.LockLost
	case topo.TxnDelete:
		if op.Version == AnyVersion {
			return topo.NoNode
		}
	}
	return topo.BadVersion
}

// TxnConditionFails evaluates the condition of op (any kind but IfHeld,
// whose claim the backend checks itself) on the state of its path:
// whether something is there, and its version if so. It reports the code
// op fails with and true when the condition does not hold: NodeExists
// for IfAbsent and CreateOp on a present path; NoNode for IfPresent and a
// DeleteOp without version on an absent one, and for every op at a
// version on an absent path; BadVersion for an op at a version on a path
// at another version (version 0, which no file has, never matches). An
// UpdateOp without version never fails. etcd2topo evaluates its failure
// reads with it, memorytopo its store. Safe for concurrent use.
func TxnConditionFails(op TxnOp, exists bool, version int64) (topo.ErrorCode, bool) {
	if !TxnConditioned(op) {
		return 0, false
	}
	switch code := TxnConditionCode(op); code {
	case topo.NodeExists:
		return code, exists
	case topo.NoNode:
		return code, !exists
	}
	if !exists {
		return topo.NoNode, true
	}
	return topo.BadVersion, op.Version == 0 || version != op.Version
}
