package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/topokit/topokit/election"
	"github.com/topokit/topokit/topo"
)

// Store layout, relative to the global cell's root:
//
//	clustermanager/desired               DesiredState (JSON), written by the leader
//	clustermanager/members/<id>/info     MemberInfo (JSON) of each live instance
//	clustermanager/members/<id>          (directory) locked by its instance while it lives
//	clustermanager/assignments/<id>      Assignment (JSON) of each member, written by the leader
//	elections/clustermanager/...         the leader election (backend layout)
const (
	baseDir        = "clustermanager"
	desiredPath    = baseDir + "/desired"
	membersDir     = baseDir + "/members"
	assignmentsDir = baseDir + "/assignments"
	electionName   = "clustermanager"
)

func memberDir(id string) string      { return membersDir + "/" + id }
func memberInfoPath(id string) string { return memberDir(id) + "/info" }
func assignmentPath(id string) string { return assignmentsDir + "/" + id }

// DesiredState is what the cluster should run: a set of shards to spread
// over the live members.
type DesiredState struct {
	Shards []string `json:"shards"`
}

// MemberInfo is a member's registration.
type MemberInfo struct {
	ID   string `json:"id"`
	Addr string `json:"addr"` // host:port of its HTTP server
}

// Assignment is the work the leader gave one member.
type Assignment struct {
	Member string   `json:"member"`
	Shards []string `json:"shards"`
	// DesiredVersion is the version of the desired-state file the
	// assignment was computed from ("" when there was none).
	DesiredVersion string `json:"desired_version"`
	// Term is the fencing token of the mastership term that wrote the
	// assignment. A member (or anything the member drives) that has seen
	// a greater Term can refuse instructions carrying a smaller one.
	Term int64 `json:"term"`
}

// Config configures a Manager.
type Config struct {
	// ID names this instance; it must be unique and a valid path segment.
	ID string
	// Addr is the host:port other instances redirect clients to.
	Addr string
	// Resync is how often the leader reconciles and probes members even
	// without changes, and how often a member checks its registration.
	Resync time.Duration
	// Logger receives the manager's logs.
	Logger *slog.Logger
}

// Manager is one cluster-manager instance: it registers itself, watches
// the assignments, and campaigns for leadership; as leader it reconciles
// the desired state into assignments. Its methods are safe for concurrent
// use.
type Manager struct {
	conn     topo.Conn
	cfg      Config
	log      *slog.Logger
	election *election.TopoElection

	reconcileMu sync.Mutex    // one reconciliation at a time in this process
	poke        chan struct{} // asks the leader loop to reconcile

	mu          sync.Mutex
	assignments map[string]Assignment // the watched view, by member id
	reconciles  int                   // completed reconciliations as leader
}

// NewManager returns a Manager that keeps its state in conn (the global
// cell). It does nothing in the store until Run.
func NewManager(ctx context.Context, conn topo.Conn, cfg Config) (*Manager, error) {
	if cfg.ID == "" || strings.Contains(cfg.ID, "/") {
		return nil, fmt.Errorf("invalid instance id %q", cfg.ID)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f, err := election.NewTopoFactory(conn, cfg.ID)
	if err != nil {
		return nil, err
	}
	e, err := f.NewTopoElection(ctx, electionName)
	if err != nil {
		return nil, err
	}
	return &Manager{
		conn:        conn,
		cfg:         cfg,
		log:         cfg.Logger.With("member", cfg.ID),
		election:    e,
		poke:        make(chan struct{}, 1),
		assignments: map[string]Assignment{},
	}, nil
}

// Run registers the instance, follows the assignments and campaigns for
// leadership until ctx ends; then it resigns, deregisters and returns nil.
// It returns early with an error only when the store refuses it for good
// (topo.IsPermanent: the connection is closed, the credentials lack a
// permission, the configuration is invalid); transient store errors are
// retried.
func (m *Manager) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	run := func(f func(context.Context) error) {
		wg.Go(func() {
			if err := f(ctx); err != nil {
				errs <- err
			}
		})
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	ctx = runCtx
	run(m.register)
	run(m.followAssignments)
	run((&election.Runner{
		Election:       m.election,
		Work:           m.lead,
		InitialBackoff: m.cfg.Resync / 10,
		MaxBackoff:     m.cfg.Resync,
		Logger:         m.log,
	}).Run)

	var err error
	select {
	case <-ctx.Done():
	case err = <-errs:
		cancel()
	}
	wg.Wait()
	closeCtx, cancelClose := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancelClose()
	if cerr := m.election.Close(closeCtx); cerr != nil {
		m.log.Warn("closing the election", "err", cerr)
	}
	return err
}

// register keeps this instance registered: it writes its info and holds the
// lock on its member directory, the liveness signal the leader probes. When
// the lock is lost (session expiry) it registers again. On ctx's end it
// deletes its info and releases the lock.
func (m *Manager) register(ctx context.Context) error {
	info, err := json.Marshal(MemberInfo{ID: m.cfg.ID, Addr: m.cfg.Addr})
	if err != nil {
		return err
	}
	for ctx.Err() == nil {
		lock, err := m.registerOnce(ctx, info)
		if err != nil {
			if topo.IsPermanent(err) {
				return err
			}
			if ctx.Err() == nil {
				m.log.Warn("registration failed; retrying", "err", err)
				sleep(ctx, m.cfg.Resync/5)
			}
			continue
		}
		m.log.Info("registered", "addr", m.cfg.Addr)
		for ctx.Err() == nil {
			sleep(ctx, m.cfg.Resync)
			if err := lock.Check(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("registration lock lost; registering again", "err", err)
				break
			}
		}
		// Deregister: drop the info first, so that a probing leader sees
		// the member gone rather than dead, then release the lock.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if ctx.Err() != nil {
			if err := m.conn.Delete(dctx, memberInfoPath(m.cfg.ID), nil); err != nil && !topo.IsErrType(err, topo.NoNode) {
				m.log.Warn("deregistering", "err", err)
			}
		}
		if err := lock.Unlock(dctx); err != nil && !topo.IsErrType(err, topo.LockLost) {
			m.log.Warn("releasing the registration lock", "err", err)
		}
		cancel()
	}
	return nil
}

// registerOnce writes the instance's info and takes the lock on its member
// directory.
func (m *Manager) registerOnce(ctx context.Context, info []byte) (topo.LockDescriptor, error) {
	var lock topo.LockDescriptor
	for lock == nil {
		if _, err := m.conn.Update(ctx, memberInfoPath(m.cfg.ID), info, nil); err != nil {
			return nil, err
		}
		var err error
		lock, err = m.conn.Lock(ctx, memberDir(m.cfg.ID), "member "+m.cfg.ID)
		if topo.IsErrType(err, topo.NoNode) && ctx.Err() == nil {
			// A leader's liveness probe found the directory unlocked in
			// between and removed the info, and the directory with it:
			// write it again.
			continue
		}
		if err != nil {
			return nil, err
		}
	}
	// A leader's probe may have found the directory unlocked and removed
	// the info in between: write it again now that the lock is ours.
	if _, err := m.conn.Update(ctx, memberInfoPath(m.cfg.ID), info, nil); err != nil {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = lock.Unlock(uctx)
		return nil, err
	}
	return lock, nil
}

// followAssignments keeps m.assignments equal to the assignment files,
// logging changes to this instance's own assignment.
func (m *Manager) followAssignments(ctx context.Context) error {
	for ctx.Err() == nil {
		initial, events, err := m.conn.WatchRecursive(ctx, assignmentsDir+"/")
		if err != nil {
			if topo.IsPermanent(err) {
				return err
			}
			if ctx.Err() == nil {
				m.log.Warn("watching assignments failed; retrying", "err", err)
				sleep(ctx, m.cfg.Resync/5)
			}
			continue
		}
		view := map[string]Assignment{}
		for _, wd := range initial {
			m.applyAssignment(view, wd)
		}
		m.mu.Lock()
		m.assignments = view
		m.mu.Unlock()
		for wd := range events {
			if wd.Err != nil && !topo.IsErrType(wd.Err, topo.NoNode) {
				if ctx.Err() == nil {
					m.log.Warn("assignment watch ended", "err", wd.Err)
				}
				continue // the channel closes next
			}
			m.mu.Lock()
			m.applyAssignment(m.assignments, wd)
			m.mu.Unlock()
		}
	}
	return nil
}

func (m *Manager) applyAssignment(view map[string]Assignment, wd *topo.WatchDataRecursive) {
	id := strings.TrimPrefix(wd.Path, assignmentsDir+"/")
	if topo.IsErrType(wd.Err, topo.NoNode) {
		delete(view, id)
		if id == m.cfg.ID {
			m.log.Info("assignment removed")
		}
		return
	}
	var a Assignment
	if err := json.Unmarshal(wd.Contents, &a); err != nil {
		m.log.Warn("ignoring a malformed assignment", "path", wd.Path, "err", err)
		return
	}
	if old, ok := view[id]; id == m.cfg.ID && (!ok || !slices.Equal(old.Shards, a.Shards)) {
		m.log.Info("assignment changed", "shards", a.Shards)
	}
	view[id] = a
}

// Assignments returns the watched view of every member's assignment.
func (m *Manager) Assignments() map[string]Assignment {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.assignments)
}

// lead is the leader's work: reconcile on every change of the desired state
// or of the membership, on every poke, and every Resync, until mastership
// ends (ctx is the mastership context).
func (m *Manager) lead(ctx context.Context) error {
	m.log.Info("leading")
	// The watch has its own context, cancelled on the way out, so that lead
	// can return (and drain the channel) while still master.
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	_, events, err := m.conn.WatchRecursive(wctx, baseDir+"/")
	if err != nil {
		return err
	}
	defer func() {
		stopWatch()
		for range events {
		}
	}()
	ticker := time.NewTicker(m.cfg.Resync)
	defer ticker.Stop()
	pending := true // reconcile once on taking over
	for {
		if pending {
			pending = false
			if _, err := m.reconcile(ctx); err != nil && ctx.Err() == nil {
				if topo.IsPermanent(err) {
					// A refused write is refused again: end the term, and
					// Run with it (the Runner gives up on permanent errors).
					return err
				}
				m.log.Warn("reconciliation failed; will retry", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			m.log.Info("no longer leading", "cause", context.Cause(ctx))
			return nil
		case wd, ok := <-events:
			if !ok {
				return errors.New("watch on " + baseDir + " ended")
			}
			if wd.Path == desiredPath || strings.HasPrefix(wd.Path, membersDir+"/") {
				pending = true
			}
		case <-m.poke:
			pending = true
		case <-ticker.C:
			pending = true
		}
	}
}

// reconcile computes every live member's assignment from the desired state
// and writes those that differ, under the lock on baseDir. ctx must be the
// mastership context. Every write is a transaction guarded by the
// mastership term and the lock (topo.IfHeld): a leader that lost
// mastership, even one that has not noticed yet (a paused process, a
// partition), cannot write, because the store refuses it. It returns the
// assignments it computed.
func (m *Manager) reconcile(ctx context.Context) (map[string]Assignment, error) {
	m.reconcileMu.Lock()
	defer m.reconcileMu.Unlock()

	term, err := m.election.Term()
	if err != nil {
		return nil, err
	}
	lock, err := m.conn.Lock(ctx, baseDir, "reconcile by "+m.cfg.ID)
	if err != nil {
		return nil, err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := lock.Unlock(uctx); err != nil {
			m.log.Warn("releasing the reconcile lock", "err", err)
		}
	}()
	guards := []topo.TxnOp{topo.IfHeld(term), topo.IfHeld(lock)}

	var desired DesiredState
	desiredVersion := ""
	data, v, err := m.conn.Get(ctx, desiredPath)
	switch {
	case err == nil:
		if err := json.Unmarshal(data, &desired); err != nil {
			return nil, fmt.Errorf("%s: %w", desiredPath, err)
		}
		desiredVersion = v.String()
	case !topo.IsErrType(err, topo.NoNode):
		return nil, err
	}
	members, err := m.liveMembers(ctx)
	if err != nil {
		return nil, err
	}

	want := assign(desired, desiredVersion, members, term.Token())
	for _, id := range members {
		if err := m.writeAssignment(ctx, guards, want[id]); err != nil {
			return nil, err
		}
	}
	existing, err := m.conn.List(ctx, assignmentsDir+"/")
	if err != nil && !topo.IsErrType(err, topo.NoNode) {
		return nil, err
	}
	for _, kv := range existing {
		id := strings.TrimPrefix(kv.Path, assignmentsDir+"/")
		if _, ok := want[id]; ok {
			continue
		}
		ops := append(slices.Clone(guards), topo.DeleteOp(kv.Path, kv.Version))
		if _, err := m.conn.Txn(ctx, ops...); err != nil && !topo.IsErrType(err, topo.NoNode) {
			return nil, err
		}
		m.log.Info("removed the assignment of a departed member", "departed", id)
	}
	m.mu.Lock()
	m.reconciles++
	m.mu.Unlock()
	return want, nil
}

// assign spreads the shards round-robin over the members, both sorted, so
// that every leader computes the same result.
func assign(desired DesiredState, version string, members []string, term int64) map[string]Assignment {
	shards := slices.Clone(desired.Shards)
	slices.Sort(shards)
	shards = slices.Compact(shards)
	out := make(map[string]Assignment, len(members))
	for _, id := range members {
		out[id] = Assignment{Member: id, Shards: []string{}, DesiredVersion: version, Term: term}
	}
	for i, s := range shards {
		if len(members) == 0 {
			break
		}
		id := members[i%len(members)]
		a := out[id]
		a.Shards = append(a.Shards, s)
		out[id] = a
	}
	return out
}

// writeAssignment writes a, unless it is already there, in one transaction
// with guards (the term and lock conditions) and the file's version.
func (m *Manager) writeAssignment(ctx context.Context, guards []topo.TxnOp, a Assignment) error {
	data, err := json.Marshal(a)
	if err != nil {
		return err
	}
	path := assignmentPath(a.Member)
	old, v, err := m.conn.Get(ctx, path)
	var write topo.TxnOp
	switch {
	case err == nil && bytes.Equal(old, data):
		return nil
	case err == nil:
		write = topo.UpdateOp(path, data, v)
	case topo.IsErrType(err, topo.NoNode):
		write = topo.CreateOp(path, data)
	default:
		return err
	}
	if _, err := m.conn.Txn(ctx, append(slices.Clone(guards), write)...); err != nil {
		return err
	}
	m.log.Info("assigned", "to", a.Member, "shards", a.Shards, "term", a.Term)
	return nil
}

// liveMembers lists the registered members, sorted, probing the others'
// registration locks: a member whose lock can be taken is gone (its
// process died and its session ended), so its info is removed.
func (m *Manager) liveMembers(ctx context.Context) ([]string, error) {
	entries, err := m.conn.ListDir(ctx, membersDir, false)
	if topo.IsErrType(err, topo.NoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var live []string
	for _, e := range entries {
		id := e.Name
		if id == m.cfg.ID {
			live = append(live, id)
			continue
		}
		probe, err := m.conn.TryLock(ctx, memberDir(id), "liveness probe by "+m.cfg.ID)
		switch {
		case topo.IsErrType(err, topo.NodeExists):
			live = append(live, id) // its owner holds it
		case topo.IsErrType(err, topo.NoNode):
			// Deregistered meanwhile.
		case topo.IsErrType(err, topo.InvalidArgument):
			// Not a member's directory (a file another tool wrote
			// here, a name the store refuses): that entry's problem,
			// not the store's, so skip it rather than end the term.
			m.log.Warn("skipping an entry that is no member", "entry", id, "err", err)
		case err != nil:
			return nil, err
		default:
			derr := m.conn.Delete(ctx, memberInfoPath(id), nil)
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			uerr := probe.Unlock(uctx)
			cancel()
			if derr != nil && !topo.IsErrType(derr, topo.NoNode) {
				return nil, derr
			}
			if uerr != nil {
				m.log.Warn("releasing a probe lock", "member", id, "err", uerr)
			}
			m.log.Info("removed a dead member", "dead", id)
		}
	}
	slices.Sort(live)
	return live, nil
}

// leaderAddr returns the id and HTTP address of the current leader; id is
// "" when nobody leads.
func (m *Manager) leaderAddr(ctx context.Context) (id, addr string, err error) {
	id, err = m.election.Leader(ctx)
	if err != nil || id == "" {
		return "", "", err
	}
	data, _, err := m.conn.Get(ctx, memberInfoPath(id))
	if err != nil {
		return id, "", err
	}
	var info MemberInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return id, "", err
	}
	return id, info.Addr, nil
}

// requestReconcile asks the leader loop to reconcile soon.
func (m *Manager) requestReconcile() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
