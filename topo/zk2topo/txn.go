package zk2topo

import (
	"context"
	"errors"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// DefaultMaxTxnBytes is the default of Options.MaxTxnBytes: ZooKeeper's
// default jute.maxbuffer, above which the server drops the connection.
const DefaultMaxTxnBytes = 0xfffff

// clientMaxRequest is the largest request go-zookeeper v1.0.4 can encode.
const clientMaxRequest = 1536*1024 - 4

// maxTxnAttempts bounds the multis one Txn sends.
const maxTxnAttempts = 10

// ErrTxnContention is the cause (errors.Is) of the ResourceExhausted
// error of a Txn that gave up after ten multis, each refused because
// another client changed a znode it depends on (a parent created or
// removed, a directory turned into a file) since the reads it was built
// on. Nothing was applied: calling Txn again is safe.
var ErrTxnContention = errors.New("zk2topo: the transaction lost every attempt to concurrent writers; nothing of it was applied")

// errEntry is the cause of the error of a write that would land on a lock
// or election entry (see entryCheck).
var errEntry = errors.New("zk2topo: the znode is a lock or election entry (ephemeral, at a reserved place): not a file")

// errOwnZnodes is the cause of the InvalidPath of a write to ZooKeeper's
// own znodes.
var errOwnZnodes = errors.New("zk2topo: ZooKeeper's own znodes cannot be written")

// Txn applies ops as one ZooKeeper multi: all of them or none. It returns
// the new version of each CreateOp and UpdateOp, nil for the other ops.
//
// The multi holds every condition first, then every write (each in op
// order), so that every condition sees the state before the transaction.
// When it fails at a condition while a write of lower index comes after
// it, the next multi leaves that op out and ends with a check that always
// fails (one round trip more, on that failure only), so that the
// *topo.TxnError names the first failing op in the caller's order. The op
// left out is sent again in that multi after the ops before it (those
// after it left out too), before the check, when none of them names its
// path or one above or below it and it has no missing parent: the op
// named then fails with every op before it passing at one instant, also
// while other clients write; when it passes too, the Stats are read again
// and the Txn starts over. Per op:
//
//   - IfHeld(f): a check (any version) of the claim's entry, the multi run
//     on the claim's session behind a sync and an exists of the entry (one
//     round trip more, beside any Stat reads, and again before every later
//     multi) that must show it the session's with the claim's token
//     (verify). All IfHeld ops must be claims of one session, of a Conn on
//     the same server addresses (InvalidArgument otherwise). A claim
//     released or lost locally fails with LockLost: at once as the first
//     op, otherwise as a check that cannot pass (on the current session
//     when no claim is live), so that an earlier failing op is named.
//   - IfVersion(p, v), IfPresent(p): a check at v (for IfPresent, at the
//     version read); one that fails (-2) when p was read absent, as for a
//     versioned UpdateOp. UpdateOp(p, c, v): a set-data at v.
//   - UpdateOp(p, c, nil): a set-data at any version, or a create (with
//     missing parents) when the file is absent.
//   - CreateOp(p, c): creates of the missing parents (one that another
//     write creates as a file is created once, as that file), then of p;
//     over a znode that is only a directory, a set-data at its version (as
//     Create), and at the head of the multi a check that a child the
//     read showed exists (roleSame, see build).
//   - DeleteOp(p, v): a delete (at v if given). A file with files below
//     it, or that another CreateOp or UpdateOp writes below (keepsDir),
//     is emptied by a set-data instead (as Delete; with a check of a
//     child, as CreateOp's over a directory) and read behind the
//     multi, no round trip more (unfiledPaths). For keepsDir, its Stat is
//     read before the first multi (one round trip, with the Stats of the
//     unversioned UpdateOps below it), which creates the directories
//     between when it had no children (belowEmptied). Parents left empty
//     are removed after the multi, best effort (cleanupDirs).
//   - IfAbsent(p): a create of p and its delete, back to back (the create
//     fails when p exists); for an absent parent, the same pair on the
//     highest missing ancestor. Nothing remains, but the parent's child
//     version grows and child watches on it (and exists watches on p) fire.
//
// A CreateOp or UpdateOp of empty contents that would leave an empty
// znode with children (it reads as a directory) fails with a
// *topo.TxnError wrapping InvalidArgument and ErrEmptyFileWithChildren,
// nothing written: at once when another CreateOp or UpdateOp writes a
// file below its path; otherwise once a Stat shows the znode with
// children, even if a DeleteOp of the Txn removes them (an unconditional
// UpdateOp of empty contents reads its Stat before the multi, one round
// trip more, and writes at the version read). A file created below the
// path between that read and the multi is not seen (see Update).
//
// Where znodes may be lock or election entries (see Update), UpdateOp
// and DeleteOp read their Stat first and leave an ephemeral znode alone
// (UpdateOp NodeExists, DeleteOp NoNode), writing at the version read;
// the window: the file replaced by an entry at the same version between
// the read and the multi.
//
// A multi cannot tell a file from a directory, so IfVersion, IfPresent and
// a versioned UpdateOp read the Stat first (one round trip more). A
// condition fails only as the multi finds it (through the leader): a
// Stat read may come from a follower behind it
// (TestTxnFirstConditionOnLaggingFollower). A Txn of
// only CreateOp, unversioned UpdateOp of non-empty contents, DeleteOp
// (with no write below it) and IfAbsent costs one round trip when nothing
// is missing, two with IfHeld. A multi failing where only a Stat tells why
// (a missing parent, a directory where a file was expected, a delete
// refused for children) is followed by reads and a new multi, at most ten
// multis in all; CreateOps in new directories cost two multis and a round
// of reads, or one multi with a right DirectoriesAbsent hint.
//
// The encoded request must not exceed Options.MaxTxnBytes (at most
// go-zookeeper's 1.5 MiB buffer): a larger one is InvalidArgument
// (backendkit.TxnTooLarge), refused before anything is sent unless only
// the creates of missing parents make it too large (then refused once a
// multi without them failed and the parents were read). No op count limit.
//
// Errors: those of backendkit.CheckTxn; InvalidPath for ZooKeeper's own
// znodes; ForeignFence for another backend's Fence; Closed; a
// *topo.TxnError naming the first failing op with NodeExists, NoNode,
// BadVersion or LockLost (nothing written), or wrapping PermissionDenied
// or InvalidArgument for an op the server refused, or InvalidArgument
// with ErrEmptyFileWithChildren (nothing written; it names the op found,
// not necessarily the first failing one); Unavailable when the multi's
// answer was lost, Timeout or Interrupted when ctx ended first (either
// way it may have been applied); ResourceExhausted wrapping
// ErrTxnContention (nothing applied; retrying is safe).
func (c *Conn) Txn(ctx context.Context, ops ...topo.TxnOp) ([]topo.Version, error) {
	tops, err := backendkit.CheckTxn(ctx, ops)
	if err != nil {
		return nil, err
	}
	t := &txn{c: c, ops: tops, st: make([]opState, len(tops)), claims: make([]fenceClaim, len(tops)), excluded: map[int]bool{}, pin: -1}
	for i, op := range tops {
		if op.Kind == topo.TxnIfHeld {
			cl, ok := claimOf(op.Fence)
			if !ok {
				return nil, backendkit.ForeignFence(op, FactoryName)
			}
			if cl.conn != c && !sameServers(cl.conn, c) {
				return nil, backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidArgument, "",
					errors.New("zk2topo: the claim belongs to a Conn of other ZooKeeper servers")))
			}
			if cl.dead {
				t.claims[i] = cl // checked by an op that fails (see build)
				continue
			}
			if t.guard != nil && cl.sess != t.guard {
				return nil, backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidArgument, "",
					errors.New("zk2topo: the claims of one transaction must belong to one ZooKeeper session")))
			}
			t.guard, t.claims[i] = cl.sess, cl
			continue
		}
		if c.internal(op.Path) {
			return nil, backendkit.TxnOpError(op, backendkit.Wrap(topo.InvalidPath, op.Path, errOwnZnodes))
		}
	}
	t.above = writeParents(tops)
	if err := emptyUnderWrites(tops, t.above); err != nil {
		return nil, err
	}
	t.hints(ctx)
	m := t.build()
	if t.checkSize(m) != nil {
		// Without the creates DirectoriesAbsent adds.
		for i := range t.st {
			t.st[i].missing = nil
		}
		m = t.build()
		if err := t.checkSize(m); err != nil {
			return nil, err
		}
	}
	if c.closed.Load() {
		return nil, topo.NewError(topo.Closed, "")
	}
	if tops[0].Kind == topo.TxnIfHeld && t.claims[0].dead {
		return nil, backendkit.TxnFailed(tops[0], topo.LockLost)
	}
	if t.guard != nil {
		t.s = t.guard
	} else if t.s, err = c.live(ctx, ""); err != nil {
		return nil, err
	}
	return t.run(ctx, m)
}

// fenceClaim is what IfHeld checks: an entry of a session.
type fenceClaim struct {
	dead  bool  // ended locally before the Txn (see Txn)
	conn  *Conn // the Conn that took the claim
	sess  *zkSession
	node  string
	token int64 // the entry's Czxid
}

// claimOf finds the claims engine's claim behind f (claims.FenceGuard),
// when a zk2topo Conn's engine issued it.
func claimOf(f topo.Fence) (fenceClaim, bool) {
	g, ok := claims.FenceGuard(f)
	if !ok {
		return fenceClaim{}, false
	}
	d, ok := g.Driver().(driver)
	if !ok {
		return fenceClaim{}, false
	}
	s, e := g.Session().Ref().(*zkSession), g.Entry()
	rec := s.entry(e.Key)
	dead := !g.Live() || s.isLost() || rec == nil || rec.token != e.Token
	return fenceClaim{dead: dead, conn: d.c, sess: s, node: e.Key, token: e.Token}, true
}

// sameServers reports whether a and b were opened on the same server
// addresses (in any order): only then may a claim of another Conn guard a
// Txn, so that no Txn is carried to another ensemble.
func sameServers(a, b *Conn) bool {
	return slices.Equal(slices.Sorted(slices.Values(a.opts.Servers)), slices.Sorted(slices.Values(b.opts.Servers)))
}

// opState is what reads showed about one op's path, for the next multi.
type opState struct {
	statted bool
	exists  bool
	st      *zk.Stat
	// child is a child's name the read showed, for CreateOp and DeleteOp
	// (kindOn), "" when none.
	child string
	// missing lists the absent ancestors of the path (znode paths, top
	// down), read after a create failed with NoNode.
	missing []string
}

// dirOnly reports whether the Stat read shows a znode that is not a file
// (only a directory, or an ephemeral entry).
func (s *opState) dirOnly() bool {
	return s.statted && s.exists && (!isFile(s.st) || s.st.EphemeralOwner != 0)
}

// onlyDir reports whether the Stat read shows a znode that is only a
// directory (no data, children): what Create turns into the file.
func (s *opState) onlyDir() bool {
	return s.statted && s.exists && !isFile(s.st)
}

// txn is one Txn call.
type txn struct {
	c           *Conn
	ops         []backendkit.TxnOp
	st          []opState
	claims      []fenceClaim
	guard       *zkSession      // the claims' session, nil when no IfHeld
	s           *zkSession      // the session the multi runs on
	excluded    map[int]bool    // ops known to fail, left out of the next multi (see run)
	pin         int             // the lowest excluded op, sent again after every other op (see run); -1: none
	above       map[string]bool // the paths above the files the CreateOps and UpdateOps write (writeParents)
	parentsRead bool            // the last failure was handled by parents: no new reads
}

// Roles of the requests of a multi.
const (
	roleMain      = iota // the op itself
	roleParent           // a missing parent directory's create
	roleProbe            // IfAbsent's create (and delete) of the probed znode
	roleKind             // a check of the version a Stat showed
	roleSentinel         // a check that fails: the Stat showed the op fails
	roleDirToFile        // CreateOp over a directory: set-data at its version
	roleUnfile           // DeleteOp of a file with children: set-data to empty
	roleCreate           // UpdateOp without version of an absent file: create
	roleEnd              // the last check of a multi with excluded ops: always fails
	roleEntry            // a check that fails: the Stat showed a lock or election entry (see entryCheck)
	roleAt               // a write without a version, made at the version its Stat showed (see entryCheck)
	roleSame             // a check that a child the Stat read showed exists: the znode is the one read (see build)
	roleAbsent           // a check that fails: the Stat of IfVersion's, IfPresent's or a versioned UpdateOp's znode showed it absent
)

// mreq is one request of a multi and the op it belongs to.
type mreq struct {
	req  any
	op   int
	role int
}

// build returns the multi for the current op states (see Txn), without
// the excluded ops, ended by a check that always fails when there are any.
func (t *txn) build() []mreq {
	c := t.c
	var out []mreq
	// pre holds the checks of roleSame, first in the multi: of the
	// state before it, as conditions (a DeleteOp of the Txn may delete the
	// child checked). A write at the version read of a znode read with
	// children (roleDirToFile, roleUnfile) checks that a child it showed
	// (anyChild) exists: ZooKeeper deletes no znode that has children, so
	// while it stays the znode is the one read. The data version alone
	// cannot tell: the znode deleted and re-created since (a file where a
	// directory was, or the reverse) starts again at version 0, and
	// directories stay at theirs. A child gone since (the znode perhaps
	// with it) fails the multi: read again. What it cannot tell: the znode
	// and that child both deleted and re-created in between.
	var pre []mreq
	same := func(i int, zp string) {
		if child := t.st[i].child; child != "" {
			pre = append(pre, mreq{&zk.CheckVersionRequest{Path: zp + "/" + child, Version: -1}, i, roleSame})
		}
	}
	made := map[string]bool{} // znodes this multi creates
	// The znodes the writes create as files: a missing parent of one write
	// that another creates as a file is created once, as that write.
	files := map[string]int{}
	for i, op := range t.ops {
		if !t.excluded[i] && t.createsFile(i) {
			files[c.zkPath(op.Path)] = i
		}
	}
	parents := func(i int) {
		for _, d := range t.st[i].missing {
			if made[d] {
				continue
			}
			made[d] = true
			if k, ok := files[d]; ok {
				role := roleMain
				if t.ops[k].Kind == topo.TxnUpdate {
					role = roleCreate
				}
				out = append(out, mreq{&zk.CreateRequest{Path: d, Data: t.ops[k].Contents, Acl: c.acl, Flags: zk.FlagPersistent}, k, role})
				continue
			}
			out = append(out, mreq{&zk.CreateRequest{Path: d, Acl: c.acl, Flags: zk.FlagPersistent}, i, roleParent})
		}
	}
	kindFail := func(i int, zp string) {
		st := t.st[i].st
		out = append(out,
			mreq{&zk.CheckVersionRequest{Path: zp, Version: st.Version}, i, roleKind},
			mreq{&zk.CheckVersionRequest{Path: zp, Version: -2}, i, roleSentinel})
	}
	emit := func(i int) {
		op := t.ops[i]
		zp := c.zkPath(op.Path)
		s := &t.st[i]
		switch op.Kind {
		case topo.TxnIfHeld:
			cl := t.claims[i]
			v := int32(-1)
			if cl.dead {
				v = -2 // no znode has it: fails, NoNode or BadVersion
			}
			out = append(out, mreq{&zk.CheckVersionRequest{Path: cl.node, Version: v}, i, roleMain})
		case topo.TxnIfVersion, topo.TxnIfPresent:
			v, role := zkVersion(op.Version), roleMain
			switch {
			case !s.exists:
				// Absent: a check that fails, NoNode while still absent;
				// a znode that appeared (a file, or the directory of a
				// file created below, at version 0) is read again.
				v, role = -2, roleAbsent
			case op.Kind == topo.TxnIfPresent:
				// At the version read: a file emptied into a directory
				// since (a Delete of a file with files below it) fails
				// the check, which any version would pass.
				v = s.st.Version
			}
			if s.dirOnly() {
				kindFail(i, zp)
			} else {
				out = append(out, mreq{&zk.CheckVersionRequest{Path: zp, Version: v}, i, role})
			}
		case topo.TxnIfAbsent:
			switch {
			case s.dirOnly():
				out = append(out, mreq{&zk.CheckVersionRequest{Path: zp, Version: s.st.Version}, i, roleKind})
			default:
				probe := zp
				if len(s.missing) > 0 {
					probe = s.missing[0]
				}
				out = append(out,
					mreq{&zk.CreateRequest{Path: probe, Acl: c.acl, Flags: zk.FlagPersistent}, i, roleProbe},
					mreq{&zk.DeleteRequest{Path: probe, Version: -1}, i, roleProbe})
			}
		case topo.TxnCreate:
			if s.onlyDir() {
				same(i, zp) // not a file re-created since at that version
				out = append(out, mreq{&zk.SetDataRequest{Path: zp, Data: op.Contents, Version: s.st.Version}, i, roleDirToFile})
			} else if !made[zp] { // else created already, as another write's parent
				parents(i)
				made[zp] = true
				out = append(out, mreq{&zk.CreateRequest{Path: zp, Data: op.Contents, Acl: c.acl, Flags: zk.FlagPersistent}, i, roleMain})
			}
		case topo.TxnUpdate:
			switch {
			case t.entryCheck(i) && s.isEntry():
				out = append(out, mreq{&zk.CheckVersionRequest{Path: zp, Version: -2}, i, roleEntry})
			case op.Version == backendkit.AnyVersion && s.statted && s.exists && (t.emptyWrite(i) || t.entryCheck(i) && !s.dirOnly()):
				// At the version read: a file re-written or re-created
				// since fails the multi and is read again (empty contents
				// onto a znode read without children: emptyOntoChildren).
				out = append(out, mreq{&zk.SetDataRequest{Path: zp, Data: op.Contents, Version: s.st.Version}, i, roleAt})
			case op.Version != backendkit.AnyVersion && s.dirOnly():
				kindFail(i, zp)
			case op.Version != backendkit.AnyVersion && !s.exists:
				// As IfVersion's: a set-data at 0 would write onto a
				// directory created meanwhile.
				out = append(out, mreq{&zk.CheckVersionRequest{Path: zp, Version: -2}, i, roleAbsent})
			case op.Version == backendkit.AnyVersion && s.statted && !s.exists && made[zp]:
				// Created already, as another write's parent.
			case op.Version == backendkit.AnyVersion && s.statted && !s.exists:
				parents(i)
				made[zp] = true
				out = append(out, mreq{&zk.CreateRequest{Path: zp, Data: op.Contents, Acl: c.acl, Flags: zk.FlagPersistent}, i, roleCreate})
			default:
				out = append(out, mreq{&zk.SetDataRequest{Path: zp, Data: op.Contents, Version: zkVersion(op.Version)}, i, roleMain})
			}
		case topo.TxnDelete:
			// A file another write of the Txn writes below (keepsDir) is
			// emptied as one with children: deleted, the write below
			// would fail for want of its parent (or the delete, after it,
			// for its child), on every attempt.
			unfile := s.statted && s.exists && !s.dirOnly() && (s.st.NumChildren > 0 || t.keepsDir(i))
			if t.entryCheck(i) && s.isEntry() {
				out = append(out, mreq{&zk.CheckVersionRequest{Path: zp, Version: -2}, i, roleEntry})
			} else if t.entryCheck(i) && op.Version == backendkit.AnyVersion && s.statted && s.exists && !unfile {
				out = append(out, mreq{&zk.DeleteRequest{Path: zp, Version: s.st.Version}, i, roleAt})
			} else if unfile {
				v := s.st.Version
				if op.Version != backendkit.AnyVersion {
					v = zkVersion(op.Version)
				}
				same(i, zp) // not a directory re-created since at that version
				out = append(out, mreq{&zk.SetDataRequest{Path: zp, Data: nil, Version: v}, i, roleUnfile})
			} else {
				out = append(out, mreq{&zk.DeleteRequest{Path: zp, Version: zkVersion(op.Version)}, i, roleMain})
			}
		}
	}
	for _, i := range backendkit.ConditionsFirst(t.ops, func(i int) bool { return t.excluded[i] }) {
		emit(i)
	}
	if len(t.excluded) > 0 {
		if t.pin >= 0 {
			emit(t.pin) // after every other op: see run
		}
		out = append(out, mreq{&zk.CheckVersionRequest{Path: "/", Version: -2}, -1, roleEnd})
	}
	return append(pre, out...)
}

// Encoded sizes of the parts of a multi request (jute: int32 lengths,
// bool as one byte).
const (
	sizeRequestHeader = 8 // xid, opcode
	sizeMultiHeader   = 9 // type, done, err
)

// checkSize returns TxnTooLarge when the multi m, encoded, exceeds the
// Conn's limit.
func (t *txn) checkSize(m []mreq) error {
	limit := t.c.opts.MaxTxnBytes
	if limit <= 0 {
		limit = DefaultMaxTxnBytes
	}
	limit = min(limit, clientMaxRequest)
	n := sizeRequestHeader + sizeMultiHeader
	str := func(s string) int { return 4 + len(s) }
	for _, r := range m {
		n += sizeMultiHeader + str(reqPath(r.req)) + 4 // path, version or flags
		switch q := r.req.(type) {
		case *zk.CreateRequest:
			n += 4 + len(q.Data) + 4
			for _, a := range q.Acl {
				n += 4 + str(a.Scheme) + str(a.ID)
			}
		case *zk.SetDataRequest:
			n += 4 + len(q.Data)
		}
	}
	if n > limit {
		return backendkit.TxnTooLarge("ZooKeeper (jute.maxbuffer, Options.MaxTxnBytes)", n, limit, "request bytes")
	}
	return nil
}

// dirHint is the context key of the directories a caller describes to
// Txn as absent (DirectoriesAbsent).
type dirHint struct{}

// DirectoriesAbsent returns a copy of ctx telling a Txn that the
// directories dirs (canonical paths below the Conn's root, each implying
// those below it) are believed absent: the first multi creates the ones
// above each CreateOp's file before the file, instead of failing for want
// of them and reading every ancestor's Stat (two round trips more). It is
// only a hint: a wrong one costs a failed multi (nothing written), never a
// different result. Other backends and zk2topo's other calls ignore it;
// topoctl's import and copy use it.
func DirectoriesAbsent(ctx context.Context, dirs ...string) context.Context {
	return context.WithValue(ctx, dirHint{}, dirs)
}

// hints applies the directory hint of ctx (see DirectoriesAbsent) to the
// first multi.
func (t *txn) hints(ctx context.Context) {
	c := t.c
	dirs, _ := ctx.Value(dirHint{}).([]string)
	absent := map[string]bool{} // znodes below the root
	for _, d := range dirs {
		if p, err := topo.CleanDirPath(d); err == nil && p != "" {
			absent[c.zkPath(p)] = true
		}
	}
	for i := range t.ops {
		if len(absent) == 0 || t.ops[i].Kind != topo.TxnCreate || !t.createsFile(i) {
			continue
		}
		named := false // the highest named one and every one below it
		t.st[i].missing = missingChain(ancestorsOf(c.zkPath(t.ops[i].Path)), func(d string) bool {
			named = named || absent[d]
			return !named
		})
	}
}

// createsFile reports whether op i's multi creates its znode as a file: a
// CreateOp not known to be over a directory, an unversioned UpdateOp of a
// file read absent.
func (t *txn) createsFile(i int) bool {
	op, s := t.ops[i], &t.st[i]
	switch op.Kind {
	case topo.TxnCreate:
		return !s.onlyDir()
	case topo.TxnUpdate:
		return op.Version == backendkit.AnyVersion && s.statted && !s.exists
	}
	return false
}

// emptyWrite reports whether op i is a CreateOp or UpdateOp of empty
// contents (see ErrEmptyFileWithChildren).
func (t *txn) emptyWrite(i int) bool {
	k := t.ops[i].Kind
	return (k == topo.TxnCreate || k == topo.TxnUpdate) && len(t.ops[i].Contents) == 0
}

// emptyOntoChildren returns the error (ErrEmptyFileWithChildren) of the
// first op not excluded that writes empty contents onto a znode its Stat
// showed with children and that the multi would otherwise write: a
// CreateOp over a directory-only znode, an unversioned UpdateOp, a
// versioned UpdateOp of a file at that version (otherwise the multi fails
// it with BadVersion or NoNode).
func (t *txn) emptyOntoChildren() error {
	for i, op := range t.ops {
		s := &t.st[i]
		if t.excluded[i] || !t.emptyWrite(i) || !s.statted || !s.exists || s.st.NumChildren == 0 || s.st.EphemeralOwner != 0 {
			continue
		}
		switch {
		case op.Kind == topo.TxnCreate && !s.onlyDir(): // NodeExists in the multi
		case op.Kind == topo.TxnUpdate && op.Version != backendkit.AnyVersion && (s.dirOnly() || s.st.Version != zkVersion(op.Version)):
		default:
			return backendkit.TxnOpError(op, emptyWithChildren(op.Path))
		}
	}
	return nil
}

// writeParents returns the paths above the files that the CreateOps and
// UpdateOps of ops write: the directories the Txn leaves (or makes) there.
func writeParents(ops []backendkit.TxnOp) map[string]bool {
	above := map[string]bool{}
	for _, op := range ops {
		if op.Kind == topo.TxnCreate || op.Kind == topo.TxnUpdate {
			for d := path.Dir(op.Path); d != "." && d != "/" && d != "" && !above[d]; d = path.Dir(d) {
				above[d] = true
			}
		}
	}
	return above
}

// emptyUnderWrites returns the error (ErrEmptyFileWithChildren) of the
// first CreateOp or UpdateOp of empty contents whose path another one
// writes a file below (above, writeParents).
func emptyUnderWrites(ops []backendkit.TxnOp, above map[string]bool) error {
	for _, op := range ops {
		if (op.Kind == topo.TxnCreate || op.Kind == topo.TxnUpdate) && len(op.Contents) == 0 && above[op.Path] {
			return backendkit.TxnOpError(op, emptyWithChildren(op.Path))
		}
	}
	return nil
}

// keepsDir reports whether op i is a DeleteOp of a path another
// CreateOp or UpdateOp of the Txn writes a file below: its znode stays,
// a directory, and the DeleteOp empties its data (see build).
func (t *txn) keepsDir(i int) bool {
	return t.ops[i].Kind == topo.TxnDelete && t.above[t.ops[i].Path]
}

// belowKept reports whether op i is an unversioned UpdateOp of a path
// below a keepsDir DeleteOp's: its Stat is read with that one's, so that
// the first multi creates it when absent.
func (t *txn) belowKept(i int) bool {
	op := t.ops[i]
	if op.Kind != topo.TxnUpdate || op.Version != backendkit.AnyVersion {
		return false
	}
	return slices.ContainsFunc(t.ops, func(d backendkit.TxnOp) bool {
		return d.Kind == topo.TxnDelete && t.above[d.Path] && strings.HasPrefix(op.Path, d.Path+"/")
	})
}

// belowEmptied records, for each write that creates its file below a
// keepsDir DeleteOp's file read without children, the directories
// between the two as missing, for the first multi to create. Only a hint,
// as DirectoriesAbsent: one created meanwhile fails its create, and the
// Txn reads the ancestors.
func (t *txn) belowEmptied() {
	c := t.c
	for d, del := range t.ops {
		s := &t.st[d]
		if !t.keepsDir(d) || !s.statted || !s.exists || s.dirOnly() || s.st.NumChildren != 0 {
			continue
		}
		for i, op := range t.ops {
			if !t.createsFile(i) || t.st[i].missing != nil || !strings.HasPrefix(op.Path, del.Path+"/") {
				continue
			}
			below := c.zkPath(del.Path) + "/"
			t.st[i].missing = missingChain(ancestorsOf(c.zkPath(op.Path)), func(d string) bool { return !strings.HasPrefix(d, below) })
		}
	}
}

// entryCheck reports whether op i is an UpdateOp or DeleteOp of a znode
// that may be an entry (Conn.entriesAt; see Txn).
func (t *txn) entryCheck(i int) bool {
	k := t.ops[i].Kind
	return (k == topo.TxnUpdate || k == topo.TxnDelete) && t.c.entriesAt(t.ops[i].Path)
}

// isEntry reports whether the Stat read for op i shows an ephemeral znode.
func (s *opState) isEntry() bool {
	return s.statted && s.exists && s.st.EphemeralOwner != 0
}

// needsStat reports whether op i's meaning depends on whether its znode is
// a file, which only a read shows (see Txn).
func (t *txn) needsStat(i int) bool {
	op := t.ops[i]
	switch op.Kind {
	case topo.TxnIfVersion, topo.TxnIfPresent:
		return true
	case topo.TxnUpdate:
		return op.Version != backendkit.AnyVersion
	}
	return false
}

// run sends the multi (m, built before any read), reading Stats where a
// failure needs them, until it succeeds or fails for good.
func (t *txn) run(ctx context.Context, m []mreq) ([]topo.Version, error) {
	c := t.c
	var first []int
	for i := range t.ops {
		if t.needsStat(i) || t.entryCheck(i) || (t.ops[i].Kind == topo.TxnUpdate && t.emptyWrite(i)) || t.keepsDir(i) || t.belowKept(i) {
			first = append(first, i)
		}
	}
	low, lowErr := -1, error(nil) // the lowest op known to fail, and its TxnError
	if err := t.read(ctx, first, true, false); err != nil {
		return nil, err
	}
	t.belowEmptied()
	if t.claims[0].dead && t.ops[0].Kind == topo.TxnIfHeld {
		return nil, backendkit.TxnFailed(t.ops[0], topo.LockLost)
	}
	for attempt := 0; attempt < maxTxnAttempts; attempt++ {
		if err := t.emptyOntoChildren(); err != nil {
			return nil, err
		}
		if h := c.opts.txnRetry; h != nil && attempt > 0 {
			h()
		}
		if attempt > 0 || len(first) > 0 || t.guard != nil {
			m = t.build()
			if err := t.checkSize(m); err != nil {
				return nil, err
			}
		}
		if t.guard != nil && t.guard.isLost() {
			return nil, t.lost()
		}
		reqs := make([]any, len(m))
		for j, r := range m {
			reqs[j] = r.req
		}
		s := t.s
		answer := make(chan []zk.MultiResponse, 1) // fn may finish after do gave up
		send := func() error {
			return c.do(ctx, "", func() error {
				r, err := s.zk.Multi(reqs...)
				answer <- r
				return err
			})
		}
		// Every file the multi empties is read behind it: see unfiledPaths.
		var unfiled []emptiedReads
		var err error
		if zps := unfiledPaths(m); len(zps) > 0 {
			multi := sendFirst(s, opMulti, reqPath(reqs[0]), send)
			for _, zp := range zps {
				unfiled = append(unfiled, c.readBehind(ctx, s, c.relPath(zp), zp))
			}
			err = <-multi
		} else {
			err = send()
		}
		var res []zk.MultiResponse
		if topo.CodeOf(err) != topo.Timeout && topo.CodeOf(err) != topo.Interrupted && topo.CodeOf(err) != topo.Closed {
			res = <-answer
		}
		if err == nil {
			return t.results(ctx, m, res, unfiled), nil
		}
		j := -1 // the failing request
		if len(res) == len(m) {
			j = slices.IndexFunc(res, func(r zk.MultiResponse) bool { return r.Error != nil })
		}
		if j < 0 {
			// No per-op answer: the outcome is unknown, unless the library
			// never sent it (ErrNoServer) on a guard session now over.
			if errors.Is(err, zk.ErrNoServer) && t.guard != nil && t.guard.isLost() {
				return nil, t.lost()
			}
			return nil, c.convert(err, "")
		}
		if m[j].role == roleEnd {
			if t.pin < 0 {
				// Every op left in passed: the lowest excluded one failed
				// first (as the multi that excluded it saw it).
				return nil, lowErr
			}
			// Every op passed, the lowest excluded one too (sent last):
			// a concurrent writer changed what failed it. Start again
			// from fresh Stats.
			clear(t.excluded)
			t.pin, low, lowErr = -1, -1, nil
			if err := t.read(ctx, t.statIndexes(), true, true); err != nil {
				return nil, err
			}
			continue
		}
		done, err := t.failed(ctx, m[j], res[j].Error)
		if done {
			if !opFailure(err) {
				return nil, err
			}
			if m[j].op == t.pin {
				// The lowest excluded op, sent after every other, fails
				// while they all passed: it fails first, at this
				// multi's instant.
				return nil, err
			}
			if low < 0 || m[j].op < low {
				low, lowErr = m[j].op, err
			}
			// Done when every op below the lowest failing one had all its
			// requests before request j; otherwise leave it out and retry.
			before := map[int]bool{}
			for _, r := range m[:j] {
				if r.role != roleSame { // a check before the op's own requests
					before[r.op] = true
				}
			}
			passed := m[j].op == low || t.pin < 0
			for i := range low {
				passed = passed && (t.excluded[i] || before[i])
			}
			if passed {
				return nil, lowErr
			}
			t.excluded[m[j].op] = true
			t.pin = -1
			if t.pinnable(low) {
				// The ops after it cannot be the first failing one: not
				// sent (nor can they fail the multi before it).
				t.pin = low
				for i := low + 1; i < len(t.ops); i++ {
					t.excluded[i] = true
				}
			}
			continue
		}
		// Fresh Stats of every op (not one op per attempt) and the
		// ancestors of the absent ones, unless parents read them already.
		if t.parentsRead {
			t.parentsRead = false
			continue
		}
		if err := t.read(ctx, t.statIndexes(), true, true); err != nil {
			return nil, err
		}
	}
	if low >= 0 {
		return nil, lowErr
	}
	return nil, backendkit.Wrap(topo.ResourceExhausted, "", ErrTxnContention)
}

// statIndexes returns the ops whose Stats a round of reads reads: all
// but IfHeld's (verify reads those).
func (t *txn) statIndexes() []int {
	var idx []int
	for i, op := range t.ops {
		if op.Kind != topo.TxnIfHeld {
			idx = append(idx, i)
		}
	}
	return idx
}

// pinnable reports whether op k (the lowest op known to fail) may be sent
// after the ops before it, which alone the multi then holds besides it
// (build, t.pin): none of them names its path, an ancestor or a
// descendant of it, and its Stat showed no missing parent (a probe of one
// would see the creates before it), so that what it meets there is what
// it would meet first. An IfHeld's entry is no op's path (entryCheck).
func (t *txn) pinnable(k int) bool {
	if k < 0 || len(t.st[k].missing) > 0 {
		return false
	}
	if t.ops[k].Kind == topo.TxnIfHeld {
		return true
	}
	related := func(a, b string) bool {
		return a == b || a == "" || b == "" || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
	}
	for _, op := range t.ops[:k] {
		if op.Kind != topo.TxnIfHeld && related(op.Path, t.ops[k].Path) {
			return false
		}
	}
	return true
}

// verify reads, on the claims' session, a sync and then an exists of each
// live claim's entry (pipelined: one round trip), and marks dead every
// claim whose entry is gone or not that session's with the claim's token.
// It runs with every round of reads (statAll). Why: the package doc,
// Transactions.
func (t *txn) verify(ctx context.Context) error {
	if t.guard == nil {
		return nil
	}
	s := t.guard
	var idx []int
	for i := range t.claims {
		if t.ops[i].Kind == topo.TxnIfHeld && !t.claims[i].dead {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return nil
	}
	stats := make([]*zk.Stat, len(idx))
	found := make([]bool, len(idx))
	errs := make([]error, len(idx))
	err := t.c.do(ctx, "", func() error {
		return s.syncThen(func() error {
			var wg sync.WaitGroup
			for k, i := range idx {
				wg.Go(func() { found[k], stats[k], errs[k] = s.zk.Exists(t.claims[i].node) })
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					return err
				}
			}
			return nil
		})
	})
	if s.isLost() {
		return t.lost()
	}
	if err != nil {
		return t.c.convert(err, "")
	}
	for k, i := range idx {
		cl := &t.claims[i]
		if !found[k] || stats[k].EphemeralOwner != s.zk.SessionID() || stats[k].Czxid != cl.token {
			cl.dead = true
		}
	}
	return nil
}

// opFailure reports whether err is a TxnError of a condition that does
// not hold (NodeExists, NoNode, BadVersion, LockLost).
func opFailure(err error) bool {
	var te *topo.TxnError
	if !errors.As(err, &te) {
		return false
	}
	switch topo.CodeOf(te.Err) {
	case topo.NodeExists, topo.NoNode, topo.BadVersion, topo.LockLost:
		return true
	}
	return false
}

// failed handles zerr, the failure of request r, the first that failed in
// a multi. It returns done with the Txn's error, or false for another
// attempt: run then reads every op's Stat and ancestors (one round trip),
// unless parents just read what the next multi needs. So failed reads
// only where its decision depends on the read.
func (t *txn) failed(ctx context.Context, r mreq, zerr error) (bool, error) {
	c := t.c
	op := t.ops[r.op]
	i := r.op
	fail := func(code topo.ErrorCode) (bool, error) { return true, backendkit.TxnFailed(op, code) }
	switch {
	case errors.Is(zerr, zk.ErrNoNode), errors.Is(zerr, zk.ErrNodeExists),
		errors.Is(zerr, zk.ErrBadVersion), errors.Is(zerr, zk.ErrNotEmpty):
	default:
		return true, backendkit.TxnOpError(op, c.convert(zerr, op.Path))
	}
	restat := func() (bool, error) {
		if err := t.read(ctx, []int{i}, true, false); err != nil {
			return true, err
		}
		return false, nil
	}
	// reread explains a request at the version read or at op's version
	// that failed with BadVersion: the file was written, or emptied by
	// another client's Delete, since its Stat. Read again: NoNode once
	// it went (not BadVersion: suite subtest
	// Concurrency/DeleteFileWithChildren), BadVersion at another version
	// than op's, else another attempt.
	reread := func() (bool, error) {
		if done, err := restat(); done {
			return done, err
		}
		s := &t.st[i]
		switch {
		case !s.exists || s.dirOnly():
			return fail(topo.NoNode)
		case op.Version != backendkit.AnyVersion && zkVersion(op.Version) != s.st.Version:
			return fail(topo.BadVersion)
		}
		return false, nil
	}
	switch r.role {
	case roleSentinel:
		return fail(topo.NoNode)
	case roleAbsent:
		if errors.Is(zerr, zk.ErrNoNode) {
			return fail(topo.NoNode)
		}
		return restat() // it appeared: a file, or only a directory
	case roleEntry:
		if op.Kind == topo.TxnUpdate {
			return true, backendkit.TxnOpError(op, backendkit.Wrap(topo.NodeExists, op.Path, errEntry))
		}
		return true, backendkit.TxnOpError(op, backendkit.Wrap(topo.NoNode, op.Path, errEntry))
	case roleParent, roleCreate, roleKind, roleDirToFile, roleAt, roleSame:
		if r.role == roleParent || (r.role == roleCreate && errors.Is(zerr, zk.ErrNoNode)) {
			return t.parents(ctx) // missing higher up, created meanwhile, or a parent went
		}
		return false, nil // the Stat it was built on is stale: run reads again
	case roleProbe:
		if errors.Is(zerr, zk.ErrNoNode) || len(t.st[i].missing) > 0 {
			return false, nil // missing, or an ancestor appeared: run reads the ancestors
		}
		if done, err := restat(); done {
			return done, err
		}
		if t.st[i].exists && !t.st[i].dirOnly() {
			return fail(topo.NodeExists)
		}
		return false, nil
	case roleUnfile:
		if errors.Is(zerr, zk.ErrNoNode) {
			return fail(topo.NoNode)
		}
		return reread()
	}
	// roleMain
	switch {
	case op.Kind == topo.TxnIfHeld:
		return fail(topo.LockLost)
	case t.needsStat(i): // a check or set-data at a version
		if errors.Is(zerr, zk.ErrBadVersion) {
			return reread()
		}
		return fail(topo.NoNode)
	case op.Kind == topo.TxnCreate:
		if errors.Is(zerr, zk.ErrNoNode) {
			return t.parents(ctx)
		}
		if done, err := restat(); done {
			return done, err
		}
		if t.st[i].exists && !t.st[i].onlyDir() {
			return fail(topo.NodeExists)
		}
		return false, nil
	case op.Kind == topo.TxnUpdate:
		// Absent (the multi creates it next, with the missing ancestors run
		// reads), or re-created since.
		return false, nil
	case op.Kind == topo.TxnDelete:
		if errors.Is(zerr, zk.ErrNoNode) {
			return fail(topo.NoNode)
		}
		if done, err := restat(); done {
			return done, err
		}
		s := &t.st[i]
		if !s.exists || s.dirOnly() {
			return fail(topo.NoNode)
		}
		if errors.Is(zerr, zk.ErrBadVersion) {
			return fail(topo.BadVersion)
		}
		// ErrNotEmpty: a file with files below it is emptied (next multi).
		return false, nil
	}
	return true, backendkit.TxnOpError(op, c.convert(zerr, op.Path))
}

// statAll reads the Stats of zps concurrently on the multi's session (one
// round trip), with their children's names where kids says so (kindOn),
// and verifies the claims beside them. The error is verify's, else the
// first failed read's, for the path of op owner[k].
func (t *txn) statAll(ctx context.Context, zps []string, owner []int, kids []bool) ([]statRes, error) {
	out := make([]statRes, len(zps))
	var wg sync.WaitGroup
	var verr error
	if t.guard != nil {
		wg.Go(func() { verr = t.verify(ctx) })
	}
	for k, zp := range zps {
		if kids[k] {
			wg.Go(func() { out[k] = t.c.kindOn(ctx, t.s, t.c.relPath(zp), zp) })
			continue
		}
		wg.Go(func() { out[k] = t.c.statOn(ctx, t.s, t.c.relPath(zp), zp, false) })
	}
	wg.Wait()
	if verr != nil {
		return nil, verr
	}
	for k, r := range out {
		p := t.ops[owner[k]].Path
		switch {
		case r.err == errSessionOver && t.guard != nil:
			return nil, t.lost() // nothing of the Txn was applied: its multis failed
		case r.err == errSessionOver:
			return nil, backendkit.Wrap(topo.Unavailable, p, r.err)
		case r.err != nil:
			return nil, t.c.convert(r.err, p)
		}
	}
	return out, nil
}

// missingChain returns the absent znodes of anc (ancestors, parent first),
// top down, while they form a chain (an existing one below an absent one
// appeared meanwhile: the next multi fails there and reads again).
func missingChain(anc []string, exists func(zp string) bool) []string {
	var missing []string
	for k := len(anc) - 1; k >= 0; k-- {
		if exists(anc[k]) {
			if len(missing) > 0 {
				break
			}
			continue
		}
		missing = append(missing, anc[k])
	}
	return missing
}

// parents reads which ancestors of the files the multi creates are
// absent, for the next multi to create (one round trip for any number of
// files), after a multi failed at a create or a parent's create.
func (t *txn) parents(ctx context.Context) (bool, error) {
	var idx []int
	for i := range t.ops {
		if !t.excluded[i] && t.createsFile(i) {
			idx = append(idx, i)
		}
	}
	if err := t.read(ctx, idx, false, true); err != nil {
		return true, err
	}
	t.parentsRead = true
	return false, nil
}

// read reads, in one round trip, the Stats of the paths of ops idx (with
// self) and of their ancestors (with anc), and records each op's Stat
// (with self) and absent ancestors (missingChain; none without anc).
func (t *txn) read(ctx context.Context, idx []int, self, anc bool) error {
	c := t.c
	seen := map[string]int{} // znode path → index in zps
	var zps []string
	var owner []int // the first op whose read needs zps[k], for errors
	// kids: read with the children's names (kindOn, the cost of an
	// exists): a CreateOp or DeleteOp may write the data of a znode read
	// with children (roleDirToFile, roleUnfile), checked to be that znode
	// by one of them (roleSame).
	var kids []bool
	for _, i := range idx {
		zp := c.zkPath(t.ops[i].Path)
		var read []string
		if self {
			read = append(read, zp)
		}
		if anc {
			read = append(read, ancestorsOf(zp)...)
		}
		for _, d := range read {
			if _, ok := seen[d]; !ok {
				seen[d] = len(zps)
				zps, owner, kids = append(zps, d), append(owner, i), append(kids, false)
			}
		}
		if k := t.ops[i].Kind; self && (k == topo.TxnCreate || k == topo.TxnDelete) {
			kids[seen[zp]] = true
		}
	}
	stats, err := t.statAll(ctx, zps, owner, kids)
	if err != nil {
		return err
	}
	for _, i := range idx {
		zp := c.zkPath(t.ops[i].Path)
		s := &t.st[i]
		s.missing = nil
		if self {
			r := stats[seen[zp]]
			s.statted, s.exists, s.st, s.child = true, r.exists, r.st, r.child
		}
		if anc && (!self || !s.exists) {
			s.missing = missingChain(ancestorsOf(zp), func(d string) bool { return stats[seen[d]].exists })
		}
	}
	return nil
}

// ancestorsOf returns the ancestors of the znode path zp below "/", the
// parent first.
func ancestorsOf(zp string) []string {
	var out []string
	for d := zkDir(zp); d != "/" && d != ""; d = zkDir(d) {
		out = append(out, d)
	}
	return out
}

// lost is the error of a Txn whose claims' session is over before a multi
// was sent: LockLost for its first IfHeld op (there is one: t.guard is
// set).
func (t *txn) lost() error {
	i := slices.IndexFunc(t.ops, func(op backendkit.TxnOp) bool { return op.Kind == topo.TxnIfHeld })
	return backendkit.TxnFailed(t.ops[i], topo.LockLost)
}

// unfiledPaths returns the znodes whose data the multi m empties
// (roleUnfile). Their children may all go at the same moment (another
// client's Delete), leaving an empty file nobody wrote; so each is read
// behind the multi and removed when empty
// (TestTxnDeleteFileWithChildrenRacingLastChild,
// TestDeleteFileWithChildrenRacingLastChild).
func unfiledPaths(m []mreq) []string {
	var out []string
	for _, r := range m {
		if r.role == roleUnfile {
			out = append(out, r.req.(*zk.SetDataRequest).Path)
		}
	}
	return out
}

// reqPath is the path of a multi's request.
func reqPath(req any) string {
	switch q := req.(type) {
	case *zk.CreateRequest:
		return q.Path
	case *zk.SetDataRequest:
		return q.Path
	case *zk.DeleteRequest:
		return q.Path
	case *zk.CheckVersionRequest:
		return q.Path
	}
	return ""
}

// results turns a successful multi's answers into Txn's versions, and
// removes, best effort, the parents the deletes left empty and the files
// it emptied that unfiled shows without children.
func (t *txn) results(ctx context.Context, m []mreq, res []zk.MultiResponse, unfiled []emptiedReads) []topo.Version {
	c := t.c
	out := make([]topo.Version, len(t.ops))
	var cleanup []string
	for j, r := range m {
		op := t.ops[r.op]
		switch {
		case r.role == roleMain && op.Kind == topo.TxnCreate, r.role == roleCreate:
			out[r.op] = topo.NumericVersion(0)
		case (r.role == roleMain || r.role == roleAt) && op.Kind == topo.TxnUpdate, r.role == roleDirToFile:
			if st := res[j].Stat; st != nil {
				out[r.op] = topo.NumericVersion(st.Version)
			}
		case (r.role == roleMain || r.role == roleAt) && op.Kind == topo.TxnDelete:
			if parent := zkDir(c.zkPath(op.Path)); parent != c.zkPath("") {
				cleanup = append(cleanup, parent)
			}
		}
	}
	for _, u := range unfiled {
		c.removeIfEmpty(ctx, u, slices.Contains(cleanup, u.dir)) // cleanupDirs reads it
	}
	c.cleanupDirs(ctx, cleanupAttempts, cleanup...)
	return out
}
