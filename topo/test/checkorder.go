package test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/topokit/topokit/topo"
)

// orderCase is one call whose arguments fail more than one of backendkit's
// checks (docs/backends.md, "The check order"): it must return the error
// of the first check that fails, whatever else is wrong with it, on an
// open Conn as on a closed one, and an ended context must come first.
type orderCase struct {
	name string
	// code is the error on a live context, open or closed Conn.
	code topo.ErrorCode
	// msg is in the message: backendkit's wording of the check that
	// failed ("" when backendkit leaves the wording to topo's path rules
	// or to the backend).
	msg string
	// notMsg is not in the message: the wording of a later check, which a
	// backend that checks in another order gives instead.
	notMsg string
	// txnOp says the error is a *topo.TxnError naming op 0.
	txnOp bool
	call  func(ctx context.Context) error
}

// orderCases lists the check-order cases on c, whose store holds the file
// a/f, and on p, a participation made on c.
func orderCases(c topo.Conn, p topo.LeaderParticipation) []orderCase {
	big := make([]byte, topo.MaxValueSize+1)
	const (
		reserved  = "reserved name"
		tooLarge  = "larger than MaxValueSize"
		badVer    = "bad version"
		needsBoth = "an election needs a name and a participant id"
	)
	lock := func(l topo.LockDescriptor, err error) error { releaseIfHeld(l); return err }
	neg := topo.NumericVersion(-1)
	return []orderCase{
		// Files: the path, then the reserved names, then the value, then
		// the version.
		{"Create path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { _, err := c.Create(ctx, "a//b", big); return err }},
		{"Create reserved", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error { _, err := c.Create(ctx, "a/locks/b", big); return err }},
		{"Create value", topo.InvalidArgument, tooLarge, "", false, func(ctx context.Context) error { _, err := c.Create(ctx, "a/g", big); return err }},
		{"Update path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { _, err := c.Update(ctx, "a//f", big, neg); return err }},
		{"Update reserved", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error { _, err := c.Update(ctx, "elections/x", big, neg); return err }},
		{"Update value", topo.InvalidArgument, tooLarge, badVer, false, func(ctx context.Context) error { _, err := c.Update(ctx, "a/f", big, neg); return err }},
		{"Update version", topo.InvalidArgument, badVer, "", false, func(ctx context.Context) error { _, err := c.Update(ctx, "a/f", nil, neg); return err }},
		{"Delete path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { return c.Delete(ctx, "a/../b", neg) }},
		{"Delete reserved", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error { return c.Delete(ctx, "elections/x", neg) }},
		{"Delete reserved Lock", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error { return c.Delete(ctx, "a/Lock", neg) }},
		{"Delete version", topo.InvalidArgument, badVer, "", false, func(ctx context.Context) error { return c.Delete(ctx, "a/f", neg) }},
		{"Get path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { _, _, err := c.Get(ctx, "a/"); return err }},
		{"GetVersion path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { _, err := c.GetVersion(ctx, "a//f", -1); return err }},
		{"GetVersion version", topo.InvalidArgument, "version -1 is negative", "", false, func(ctx context.Context) error {
			_, err := c.GetVersion(ctx, "a/f", -1)
			return err
		}},
		{"List prefix", topo.InvalidPath, "", "", false, func(ctx context.Context) error { _, err := c.List(ctx, "a//"); return err }},
		{"ListDir path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { _, err := c.ListDir(ctx, "a/../b", false); return err }},
		{"Watch path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { _, ch, err := c.Watch(ctx, "a/"); drainNow(ch); return err }},
		{"WatchRecursive prefix", topo.InvalidPath, "", "", false, func(ctx context.Context) error {
			_, ch, err := c.WatchRecursive(ctx, "a//")
			drainNow(ch)
			return err
		}},
		// Locks: the directory, then the reserved names, then the value,
		// then (LockWithTTL) the ttl.
		{"Lock path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { return lock(c.Lock(ctx, "a//b", string(big))) }},
		{"Lock reserved", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error { return lock(c.Lock(ctx, "a/locks", string(big))) }},
		{"Lock value", topo.InvalidArgument, tooLarge, "", false, func(ctx context.Context) error { return lock(c.Lock(ctx, "a", string(big))) }},
		{"TryLock path", topo.InvalidPath, "", "", false, func(ctx context.Context) error { return lock(c.TryLock(ctx, "a//b", "x")) }},
		{"TryLock reserved", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error { return lock(c.TryLock(ctx, "a/locks/b", string(big))) }},
		{"TryLock value", topo.InvalidArgument, tooLarge, "", false, func(ctx context.Context) error { return lock(c.TryLock(ctx, "a", string(big))) }},
		{"LockName reserved", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error { return lock(c.LockName(ctx, "a/Lock", "x")) }},
		{"LockName value", topo.InvalidArgument, tooLarge, "", false, func(ctx context.Context) error { return lock(c.LockName(ctx, "a", string(big))) }},
		{"LockWithTTL path", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error {
			return lock(c.LockWithTTL(ctx, "a/locks", string(big), 0))
		}},
		{"LockWithTTL value", topo.InvalidArgument, tooLarge, "TTL", false, func(ctx context.Context) error {
			return lock(c.LockWithTTL(ctx, "a", string(big), -time.Second))
		}},
		{"LockWithTTL ttl", topo.InvalidArgument, "lock TTL 0s is not positive", "", false, func(ctx context.Context) error {
			return lock(c.LockWithTTL(ctx, "a", "x", 0))
		}},
		// Elections: the name and id, then the value or the resume info.
		{"Campaign value", topo.InvalidArgument, tooLarge, "", false, func(ctx context.Context) error { _, err := p.Campaign(ctx, big); return err }},
		{"Proclaim value", topo.InvalidArgument, tooLarge, "", false, func(ctx context.Context) error { return p.Proclaim(ctx, big) }},
		{"ResumeLeaderParticipation name", topo.InvalidPath, reserved, "", false, func(ctx context.Context) error {
			return resumed(c.ResumeLeaderParticipation(ctx, "e/locks", "id", []byte("not json")))
		}},
		{"ResumeLeaderParticipation id", topo.InvalidArgument, needsBoth, "", false, func(ctx context.Context) error {
			return resumed(c.ResumeLeaderParticipation(ctx, "e", "", []byte("not json")))
		}},
		{"ResumeLeaderParticipation info", topo.InvalidArgument, "", "", false, func(ctx context.Context) error {
			return resumed(c.ResumeLeaderParticipation(ctx, "e", "id", []byte("not json")))
		}},
		// Transactions: backendkit.CheckTxn (the ops in order, each its
		// path, reserved names, value and version), then the Fences.
		{"Txn reserved", topo.InvalidPath, reserved, "", true, func(ctx context.Context) error {
			_, err := c.Txn(ctx, topo.CreateOp("a/locks/x", big))
			return err
		}},
		{"Txn value", topo.InvalidArgument, tooLarge, badVer, true, func(ctx context.Context) error {
			_, err := c.Txn(ctx, topo.UpdateOp("a/f", big, neg))
			return err
		}},
		{"Txn empty", topo.InvalidArgument, "a transaction needs at least one op", "", false, func(ctx context.Context) error {
			_, err := c.Txn(ctx)
			return err
		}},
		{"Txn foreign Fence", topo.InvalidArgument, "was not issued by", "", true, func(ctx context.Context) error {
			_, err := c.Txn(ctx, topo.IfHeld(foreignFence{}), topo.UpdateOp("a/f", nil, nil))
			return err
		}},
	}
}

// resumed stops a participation a buggy backend resumed from bad input.
func resumed(p topo.LeaderParticipation, err error) error {
	if p != nil {
		p.Stop()
	}
	return err
}

// checkOrderSetup opens a Conn on s's store, creates a/f and makes a
// participation in election e, and returns the Conn with its cases.
func checkOrderSetup(s *store) (topo.Conn, []orderCase) {
	t, ctx, c := s.t, ctxFor(s.t), s.conn()
	mustCreate(t, ctx, c, "a/f", "x")
	return c, orderCases(c, participate(t, c, "e", "id"))
}

// checkCases runs every case on a live, a cancelled and an expired
// context, and reports every case that fails, not only the first.
func checkCases(t *testing.T, cases []orderCase, when string) {
	t.Helper()
	live, cancelled, expired := ctxFor(t), cancelledCtx(t), expiredCtx(t)
	for _, tc := range cases {
		what := tc.name + " " + when
		err := tc.call(live)
		if expectCode(t, err, tc.code, what) {
			if tc.msg != "" {
				assert.Containsf(t, err.Error(), tc.msg, "%s: the message does not say what backendkit's check says", what)
			}
			if tc.notMsg != "" {
				assert.NotContainsf(t, err.Error(), tc.notMsg, "%s: the message is a later check's", what)
			}
			if tc.txnOp {
				var te *topo.TxnError
				if assert.Truef(t, errors.As(err, &te), "%s: %q (%T) is not a *topo.TxnError", what, err, err) {
					assert.Equalf(t, 0, te.Index, "%s: the failing op's index (%q)", what, err)
				}
			}
		}
		expectCode(t, tc.call(cancelled), topo.Interrupted, what+", cancelled context")
		expectCode(t, tc.call(expired), topo.Timeout, what+", expired context")
	}
}

// expectCode is requireCode that lets the subtest go on: it reports
// whether err is a *topo.Error carrying code.
func expectCode(t *testing.T, err error, code topo.ErrorCode, what string) bool {
	t.Helper()
	if !assert.Errorf(t, err, "%s: want a %q error, got nil", what, code) {
		return false
	}
	var te *topo.Error
	return assert.Truef(t, errors.As(err, &te), "%s: error %q (%T) is not a *topo.Error", what, err, err) &&
		assert.Truef(t, errors.Is(err, code) && topo.IsErrType(err, code), "%s: want a %q error, got %q", what, code, err)
}

// testCheckOrderOpen: on an open Conn, a call with bad input returns the
// error of the first of backendkit's checks that fails (the path before
// the reserved names, those before the value, the value before the
// version or ttl), with backendkit's message, and an already cancelled
// or expired context comes before all of them; nothing is written.
func testCheckOrderOpen(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, cases := checkOrderSetup(s)
	before := takeSnapshot(t, ctx, c)
	checkCases(t, cases, "on an open Conn")
	requireSameSnapshot(t, ctx, c, before, "a call with bad input")
}

// testCheckOrderClosed: a closed Conn checks the context and the input as
// an open one does, and only then says Closed: the same cases give the
// same errors, a call with good input and a dead context is Interrupted
// or Timeout, and NewLeaderParticipation (which takes no context) checks
// its name and id before Closed.
func testCheckOrderClosed(s *store) {
	t, ctx := s.t, ctxFor(s.t)
	c, cases := checkOrderSetup(s)
	good := append(ctxCalls(s, c, mustCreate(t, ctx, c, "keep/f", "keep")), ctxCall{"Txn", func(ctx context.Context) error {
		_, err := c.Txn(ctx, topo.IfPresent("keep/f"), topo.UpdateOp("keep/f", []byte("x"), nil))
		return err
	}})
	other := s.conn()
	before := takeSnapshot(t, ctx, other)
	c.Close()

	_, err := c.Create(ctx, "a/g", nil)
	requireCode(t, err, topo.Closed, "Create with good input on a closed Conn")
	checkCases(t, cases, "on a closed Conn")
	cancelled, expired := cancelledCtx(t), expiredCtx(t)
	for _, cc := range good {
		expectCode(t, cc.call(cancelled), topo.Interrupted, cc.name+" with good input on a closed Conn, cancelled context")
		expectCode(t, cc.call(expired), topo.Timeout, cc.name+" with good input on a closed Conn, expired context")
	}
	for _, bad := range []struct {
		name, id string
		code     topo.ErrorCode
	}{
		{"e/locks", "id", topo.InvalidPath},
		{"e//f", "id", topo.InvalidPath},
		{"e", "", topo.InvalidArgument},
		{"", "id", topo.InvalidArgument},
		{"e", "id", topo.Closed},
	} {
		p, err := c.NewLeaderParticipation(bad.name, bad.id)
		if p != nil {
			p.Stop()
		}
		expectCode(t, err, bad.code, fmt.Sprintf("NewLeaderParticipation(%q, %q) on a closed Conn", bad.name, bad.id))
	}
	requireSameSnapshot(t, ctx, other, before, "a call on a closed Conn")
}
