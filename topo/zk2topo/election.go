package zk2topo

import (
	"context"
	"errors"
	"sort"
	"sync"

	"github.com/go-zookeeper/zk"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// NewLeaderParticipation joins the election name as participant id. A
// candidate is an ephemeral-sequential znode holding id under
// <root>/elections/<name>/ (created by WaitForLeadership); the lowest
// sequence leads and every other candidate watches only its predecessor.
// It returns InvalidArgument for an empty name or id, InvalidPath for a
// name that breaks the path rules, and Closed after Close.
func (c *Conn) NewLeaderParticipation(name, id string) (topo.LeaderParticipation, error) {
	n, err := backendkit.CheckElection(name, id)
	if err != nil {
		return nil, err
	}
	if c.closed.Load() {
		return nil, topo.NewError(topo.Closed, n)
	}
	return c.newParticipation(n, id), nil
}

// newParticipation returns the participation of id in the election with
// the canonical name n, without checking whether c is closed.
func (c *Conn) newParticipation(n, id string) *participation {
	dp := electionsDir + "/" + n
	ctx, cancel := context.WithCancel(context.Background())
	return &participation{c: c, name: n, id: id, dp: dp, dirZp: c.zkPath(dp), stopCtx: ctx, stop: cancel}
}

// participation is one candidate. Its methods are safe for concurrent use.
type participation struct {
	c       *Conn
	name    string
	id      string
	dp      string // canonical election directory path
	dirZp   string
	stopCtx context.Context // cancelled by Stop
	stop    context.CancelFunc

	waitMu sync.Mutex // serialises WaitForLeadership

	mu       sync.Mutex
	stopped  bool
	node     string        // current candidate znode, "" when none
	nodeSess *zkSession    // the session node belongs to
	valNode  string        // the value znode of node (see values.go), "" when none
	value    []byte        // the published value, encoded (see encodeValue)
	pinned   *zkSession    // the resumed session, used while it lives (see Resume)
	resigned chan struct{} // closed (and replaced) by Resign: waiting calls return
	lctx     context.Context
	lcancel  context.CancelFunc
	term     *term // the current or latest term, nil before the first
	monitor  sync.WaitGroup
}

// WaitForLeadership creates this participant's candidate znode (unless it
// has one) and blocks until it has the lowest sequence, then returns a
// context cancelled when leadership ends or may have ended: Stop, Close,
// deletion of the candidate znode, session expiry, and also a dropped
// connection to the server (while disconnected the session may expire
// unnoticed, so the leader steps down at once; calling WaitForLeadership
// again leads again as soon as the Conn is reconnected if the session and
// its candidate znode survived). While leading it returns the same context. It returns
// Interrupted after (or during) Stop, Closed after Close, and Unavailable
// when the store cannot be reached.
func (p *participation) WaitForLeadership() (context.Context, error) {
	p.waitMu.Lock()
	defer p.waitMu.Unlock()
	return p.waitLead(context.Background())
}

// waitLead is WaitForLeadership bounded by ctx (Campaign): when ctx ends
// first, the candidate is removed and the ctx's error returned. The
// caller holds waitMu.
func (p *participation) waitLead(cctx context.Context) (context.Context, error) {
	c := p.c
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil, topo.NewError(topo.Interrupted, p.name)
	}
	if p.lctx != nil && p.lctx.Err() == nil {
		ctx := p.lctx
		p.mu.Unlock()
		return ctx, nil
	}
	p.mu.Unlock()
	if c.closed.Load() {
		return nil, topo.NewError(topo.Closed, p.name)
	}
	p.mu.Lock()
	if p.resigned == nil {
		p.resigned = make(chan struct{})
	}
	resigned := p.resigned
	p.mu.Unlock()
	ctx, cancel := context.WithCancel(cctx)
	defer cancel()
	stopAfter := context.AfterFunc(p.stopCtx, cancel)
	defer stopAfter()
	go func() {
		select {
		case <-resigned:
			cancel()
		case <-ctx.Done():
		}
	}()
	endErr := func(err error) error {
		select {
		case <-resigned:
			if p.stopCtx.Err() == nil {
				// Resign withdrew the candidacy. It removes the entry it
				// saw; one made meanwhile is removed here.
				p.removeCandidate()
				return backendkit.Wrap(topo.Interrupted, p.name, errResigned)
			}
		default:
		}
		if p.stopCtx.Err() == nil && cctx.Err() != nil {
			p.removeCandidate()
			return backendkit.FromContext(cctx, p.name)
		}
		return p.stopErr(err)
	}
	for {
		sess, err := p.session(ctx)
		if err != nil {
			return nil, endErr(err)
		}
		node, err := p.candidate(ctx, sess)
		if err != nil && sess.isLost() && !topo.IsErrType(err, topo.Interrupted) && ctx.Err() == nil {
			continue // nothing of it outlives the ended session: enter again
		}
		if err != nil {
			return nil, endErr(err)
		}
		name := node[len(p.dirZp)+1:]
		for {
			children, err := p.candidates(ctx, sess)
			if err == errSessionOver {
				break // enter again on a new session
			}
			if err != nil {
				return nil, endErr(c.convert(err, p.name))
			}
			idx := sort.SearchStrings(children, name)
			if idx >= len(children) || children[idx] != name {
				// Our candidate vanished (session expired, or deleted
				// behind our back): enter again with a new one.
				p.mu.Lock()
				if p.node == node {
					p.node, p.valNode = "", ""
				}
				p.mu.Unlock()
				break
			}
			if idx == 0 {
				lctx, err := p.lead(node, sess)
				if err == errRetry {
					continue // disconnected meanwhile: check again once reconnected
				}
				if err == errGone {
					// The entry is not ours any more: enter again.
					p.mu.Lock()
					if p.node == node {
						p.node, p.valNode = "", ""
					}
					p.mu.Unlock()
					break
				}
				if err != nil {
					return nil, endErr(err)
				}
				return lctx, nil
			}
			pred := p.dirZp + "/" + children[idx-1]
			var exists bool
			var ch <-chan zk.Event
			err = c.onSession(ctx, sess, p.name, func(z *zk.Conn) error {
				var err error
				exists, _, ch, err = z.ExistsW(pred)
				return err
			})
			if err == errSessionOver {
				break
			}
			if err != nil {
				return nil, endErr(c.convert(err, p.name))
			}
			if !exists {
				continue
			}
			lost := false
			select {
			case <-ch:
			case <-sess.lost:
				lost = true
			case <-ctx.Done():
				return nil, endErr(topo.NewError(topo.Interrupted, p.name))
			case <-c.closing:
				return nil, topo.NewError(topo.Closed, p.name)
			}
			if lost {
				break
			}
		}
	}
}

// session returns the session to campaign on: the resumed one while it
// lives, else the Conn's current one.
func (p *participation) session(ctx context.Context) (*zkSession, error) {
	p.mu.Lock()
	pinned := p.pinned
	p.mu.Unlock()
	if pinned != nil && !pinned.isLost() {
		if err := pinned.ensureAuth(ctx, p.name); err != nil {
			return nil, err
		}
		return pinned, nil
	}
	return p.c.live(ctx, p.name)
}

// stopErr turns errors caused by Stop into Interrupted and removes the
// candidate znode of a participation that was stopped meanwhile.
func (p *participation) stopErr(err error) error {
	if p.stopCtx.Err() != nil {
		p.removeCandidate()
		return topo.NewError(topo.Interrupted, p.name)
	}
	return err
}

// candidate returns this participant's candidate znode for session sess,
// creating it (and the election directory) when there is none.
func (p *participation) candidate(ctx context.Context, sess *zkSession) (string, error) {
	c := p.c
	p.mu.Lock()
	node, nodeSess := p.node, p.nodeSess
	p.mu.Unlock()
	if node != "" && nodeSess == sess && !sess.isLost() {
		return node, nil
	}
	p.mu.Lock()
	value := p.value
	p.mu.Unlock()
	var valNode string
	for attempt := 0; ; attempt++ {
		n, v, err := c.createCandidate(ctx, sess, p.name, p.dirZp, []byte(p.id), value)
		if err == nil {
			node, valNode = n, v
			break
		}
		if !errors.Is(err, zk.ErrNoNode) || attempt >= 10 {
			return "", c.convert(err, p.name)
		}
		if err := c.makeDirs(ctx, p.name, p.dirZp+"/"+valuesDir); err != nil {
			return "", err
		}
	}
	p.mu.Lock()
	p.node, p.nodeSess, p.valNode = node, sess, valNode
	stopped := p.stopped
	p.mu.Unlock()
	if stopped {
		p.removeCandidate()
		return "", topo.NewError(topo.Interrupted, p.name)
	}
	return node, nil
}

// errResigned is the cause of the Interrupted error of a Campaign or
// WaitForLeadership that Resign withdrew.
var errResigned = errors.New("zk2topo: the candidacy was resigned")

// errRetry tells WaitForLeadership to check its candidate again.
var errRetry = errors.New("retry")

// errGone tells WaitForLeadership that its candidate entry is gone (or,
// under a re-created election directory, a znode of its name belongs to
// another session): it enters again with a new one.
var errGone = errors.New("candidate gone")

// lead records leadership and starts the goroutine that ends it when the
// candidate entry is deleted (or no longer owned by the session), Stop or
// Close. It reads the candidate entry's Stat first, on its session, with
// a watch: its Czxid is the term's fencing token, and the watch ends the
// term when the entry is deleted. The session's end needs no goroutine:
// the leadership context (and with it the term's Done) is a child of the
// session's lostCtx, cancelled within lose.
func (p *participation) lead(node string, sess *zkSession) (context.Context, error) {
	c := p.c
	r := <-c.statEntry(p.stopCtx, sess, p.name, node)
	switch {
	case r.err == errSessionOver:
		return nil, errRetry // the candidates read then sees the session over
	case r.err != nil:
		return nil, p.stopErr(c.convert(r.err, p.name))
	case !r.owned(sess):
		return nil, errGone
	}
	lctx, cancel := context.WithCancel(sess.lostCtx)
	// Leadership ends as soon as the connection drops: from then on the
	// server may expire the session (and let another candidate lead)
	// without this process knowing. WaitForLeadership leads again at once
	// if the session survived.
	if !sess.onDisconnect(cancel) || !sess.provablyAlive() {
		cancel()
		return nil, errRetry
	}
	t := &term{p: p, node: node, sess: sess, token: r.st.Czxid, gen: sess.entryGen(node), lctx: lctx}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		cancel()
		return nil, topo.NewError(topo.Interrupted, p.name)
	}
	p.lctx, p.lcancel, p.term = lctx, cancel, t
	p.monitor.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.monitor.Done()
		defer cancel()
		ch := r.ch
		for {
			select {
			case ev := <-ch:
				if ev.Type == zk.EventNodeDeleted || ev.Type == zk.EventNotWatching {
					return
				}
			case <-lctx.Done():
				return
			case <-p.stopCtx.Done():
				return
			case <-c.closing:
				return
			}
			var exists bool
			var st *zk.Stat
			err := c.onSession(lctx, sess, p.name, func(z *zk.Conn) error {
				var err error
				exists, st, ch, err = z.ExistsW(node)
				return err
			})
			if err != nil || !exists || st.EphemeralOwner != sess.zk.SessionID() {
				return
			}
		}
	}()
	return lctx, nil
}

// removeCandidate deletes the candidate znode (with a fresh context).
func (p *participation) removeCandidate() {
	ctx, cancel := freshContext()
	defer cancel()
	_ = p.removeCandidateCtx(ctx)
}

// removeCandidateCtx deletes the candidate znode and its value znode, in
// one multi on their session, within ctx. Nothing is sent once the
// session is over (the server deleted both with it).
func (p *participation) removeCandidateCtx(ctx context.Context) error {
	p.mu.Lock()
	node, sess, val := p.node, p.nodeSess, p.valNode
	p.node, p.valNode = "", ""
	p.mu.Unlock()
	if node == "" || p.c.closed.Load() {
		return nil
	}
	return p.c.deleteCandidate(ctx, sess, node, val)
}

// Stop withdraws: it cancels the leadership context (before the candidate
// znode is deleted, so that two leaders never overlap), makes a waiting
// WaitForLeadership return Interrupted, and deletes the candidate znode
// and its value znode. The election's znode stays (it is persistent, as
// Vitess's is: a Vitess participant creates its candidates without
// parents); its "values" container is deleted by the server once empty. It is
// idempotent and returns once the znode is deleted or the store could not
// be reached.
func (p *participation) Stop() {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.monitor.Wait()
		return
	}
	p.stopped = true
	p.stop()
	if p.lcancel != nil {
		p.lcancel()
	}
	p.mu.Unlock()
	p.removeCandidate()
	p.monitor.Wait()
}

// candidates reads the names of the candidate znodes in the election
// directory, sorted, on session sess (nil: the current one, with c.read's
// retries). Children that are not sequential entries (the directories of
// nested elections such as name/sub) are not candidates. The error is
// ZooKeeper's, not yet converted.
func (p *participation) candidates(ctx context.Context, sess *zkSession) ([]string, error) {
	var children []string
	fn := func(z *zk.Conn) error {
		var err error
		children, _, err = z.Children(p.dirZp)
		return err
	}
	var err error
	if sess == nil {
		err = p.c.read(ctx, p.name, fn)
	} else {
		err = p.c.onSession(ctx, sess, p.name, fn)
	}
	if err != nil {
		return nil, err
	}
	return entryNames(children), nil
}

// GetCurrentLeaderID returns the id stored in the lowest candidate znode,
// or "" with a nil error when there is none. Errors: Timeout/Interrupted,
// Closed, Unavailable.
func (p *participation) GetCurrentLeaderID(ctx context.Context) (string, error) {
	c := p.c
	if err := c.begin(ctx, p.name); err != nil {
		return "", err
	}
	for {
		children, err := p.candidates(ctx, nil)
		if errors.Is(err, zk.ErrNoNode) {
			return "", nil
		}
		if err != nil {
			return "", c.convert(err, p.name)
		}
		if len(children) == 0 {
			return "", nil
		}
		var data []byte
		err = c.read(ctx, p.name, func(z *zk.Conn) error {
			var err error
			data, _, err = z.Get(p.dirZp + "/" + children[0])
			return err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // it left meanwhile
		}
		if err != nil {
			return "", c.convert(err, p.name)
		}
		return string(data), nil
	}
}
