package backendkit_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

func TestTxnConditionFails(t *testing.T) {
	unversioned := backendkit.AnyVersion
	op := func(kind topo.TxnOpKind, version int64) backendkit.TxnOp {
		return backendkit.TxnOp{Kind: kind, Path: "a", Version: version}
	}
	const none = topo.ErrorCode(0) // no code has the value 0
	for _, tc := range []struct {
		name    string
		op      backendkit.TxnOp
		exists  bool
		version int64
		want    topo.ErrorCode // none: the condition holds
	}{
		{"IfAbsent on absent", op(topo.TxnIfAbsent, unversioned), false, 0, none},
		{"IfAbsent on present", op(topo.TxnIfAbsent, unversioned), true, 4, topo.NodeExists},
		{"CreateOp on absent", op(topo.TxnCreate, unversioned), false, 0, none},
		{"CreateOp on present", op(topo.TxnCreate, unversioned), true, 4, topo.NodeExists},
		{"IfPresent on present", op(topo.TxnIfPresent, unversioned), true, 4, none},
		{"IfPresent on absent", op(topo.TxnIfPresent, unversioned), false, 0, topo.NoNode},
		{"DeleteOp on present", op(topo.TxnDelete, unversioned), true, 4, none},
		{"DeleteOp on absent", op(topo.TxnDelete, unversioned), false, 0, topo.NoNode},
		{"UpdateOp on absent", op(topo.TxnUpdate, unversioned), false, 0, none},
		{"UpdateOp on present", op(topo.TxnUpdate, unversioned), true, 4, none},
		{"IfVersion matching", op(topo.TxnIfVersion, 4), true, 4, none},
		{"IfVersion stale", op(topo.TxnIfVersion, 3), true, 4, topo.BadVersion},
		{"IfVersion on absent", op(topo.TxnIfVersion, 4), false, 0, topo.NoNode},
		{"IfVersion 0", op(topo.TxnIfVersion, 0), true, 0, topo.BadVersion},
		{"UpdateOp at its version", op(topo.TxnUpdate, 4), true, 4, none},
		{"UpdateOp stale", op(topo.TxnUpdate, 3), true, 4, topo.BadVersion},
		{"UpdateOp at a version on absent", op(topo.TxnUpdate, 4), false, 0, topo.NoNode},
		{"DeleteOp at its version", op(topo.TxnDelete, 4), true, 4, none},
		{"DeleteOp stale", op(topo.TxnDelete, 3), true, 4, topo.BadVersion},
		{"DeleteOp at a version on absent", op(topo.TxnDelete, 4), false, 0, topo.NoNode},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, failed := backendkit.TxnConditionFails(tc.op, tc.exists, tc.version)
			require.Equal(t, tc.want != none, failed)
			if failed {
				require.Equal(t, tc.want, code)
			}
		})
	}
}

func TestTxnConditionCode(t *testing.T) {
	unversioned := backendkit.AnyVersion
	for _, tc := range []struct {
		kind        topo.TxnOpKind
		version     int64
		conditioned bool
		want        topo.ErrorCode
	}{
		{topo.TxnIfAbsent, unversioned, true, topo.NodeExists},
		{topo.TxnCreate, unversioned, true, topo.NodeExists},
		{topo.TxnIfPresent, unversioned, true, topo.NoNode},
		{topo.TxnDelete, unversioned, true, topo.NoNode},
		{topo.TxnIfHeld, unversioned, true, topo.LockLost},
		{topo.TxnIfVersion, 4, true, topo.BadVersion},
		{topo.TxnUpdate, 4, true, topo.BadVersion},
		{topo.TxnDelete, 4, true, topo.BadVersion},
		{topo.TxnUpdate, unversioned, false, topo.BadVersion},
	} {
		op := backendkit.TxnOp{Kind: tc.kind, Version: tc.version}
		require.Equal(t, tc.want, backendkit.TxnConditionCode(op), "kind %v version %d", tc.kind, tc.version)
		require.Equal(t, tc.conditioned, backendkit.TxnConditioned(op), "kind %v version %d", tc.kind, tc.version)
	}
}
