package inspect

import (
	"context"
	"errors"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
	"github.com/topokit/topokit/topo/tree"
)

// Lock is a held lock, as Locks and LockOf find it.
type Lock struct {
	// Dir is the locked directory's canonical path; Holder the holder's
	// description (see LockHolder).
	Dir, Holder string
	// Token is the holder's fencing token (topo.Fence.Token) and Session
	// the store's name of its session or lease (etcd: "lease " and the
	// lease id in decimal; ZooKeeper: the owner session; Consul: the
	// session id; memorytopo: ""). Both are zero when the Conn does not
	// read its queue (QueueReader; a custom backend).
	Token   int64
	Session string
	// Waiters are the contenders queued behind the holder, next to be
	// served first (nil when none, or when the Conn does not read its
	// queue). On Consul they are topokit's fair queue beside the key that
	// Vitess locks on (Vitess's own contenders do not queue, so they are
	// not listed), and a waiter's Contents is "": its queue entry carries
	// no description.
	Waiters []Entry
	// Since is when the store created the holder's entry, by the store's
	// clock (ZooKeeper: the znode's ctime); zero where the store does not
	// show it (etcd, Consul, memorytopo, custom backends).
	Since time.Time
	// TTL is how long the store would keep the holder's entry if its
	// holder stopped renewing its session now (etcd: the lease's
	// remaining TTL, in whole seconds, read through SessionTTLReader);
	// zero where the store does not show it (ZooKeeper, Consul,
	// memorytopo, custom backends).
	TTL time.Duration
}

// SessionTTLReader is implemented by a backend's Conn that can tell how
// long a session has left (etcd2topo: a lease's remaining TTL). session
// is an entry's Session; ok is false when it names no live session.
type SessionTTLReader interface {
	SessionTTL(ctx context.Context, session string) (ttl time.Duration, ok bool, err error)
}

// Entry is one contender of a lock's or an election's queue.
type Entry struct {
	// Token is the entry's order key in its queue, the fencing token it
	// holds with once served; Session is the store's name of its session
	// ("" where the store has none); Contents a lock contender's
	// description or a candidate's id.
	Token    int64
	Session  string
	Contents string
	// Since is when the store created the entry, as Lock.Since.
	Since time.Time
}

// QueueReader is implemented by a Conn whose locks and elections run on
// the claims engine: every built-in backend's, through the claims.Claims
// it embeds (see claims.Engine.Inspect). Inspect reads a queue's holder
// and waiters without joining it.
type QueueReader interface {
	Inspect(ctx context.Context, q claims.Queue) (claims.QueueState, error)
}

// entriesOf converts a queue's entries.
func entriesOf(es []claims.Entry) []Entry {
	var out []Entry
	for _, e := range es {
		out = append(out, Entry{Token: e.Token, Session: e.Session, Contents: e.Contents, Since: e.Created})
	}
	return out
}

// LockOf returns the lock on the directory dir (canonical or not, "" the
// root) with its holder, the holder's token and session, and its waiters
// in the order they will be served, read through the Conn's QueueReader
// (one read of the queue; two on Consul: the key and the queue; on etcd
// one more request for the holder's lease TTL). On a
// Conn without one (a custom backend) it falls back to LockHolder and
// leaves Token, Session and Waiters zero. Since is known on ZooKeeper
// only, TTL on etcd only (see the package doc). It returns NoNode when nobody holds the lock,
// InvalidPath for a bad or reserved dir, and the store's errors.
func LockOf(ctx context.Context, conn topo.Conn, dir string) (Lock, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return Lock{}, err
	}
	r, ok := topo.ConnAs[QueueReader](conn)
	if !ok {
		h, err := LockHolder(ctx, conn, d)
		if err != nil {
			return Lock{}, err
		}
		return Lock{Dir: d, Holder: h}, nil
	}
	st, err := r.Inspect(ctx, claims.Queue{Path: d})
	if err != nil {
		return Lock{}, err
	}
	if !st.Held {
		return Lock{}, &topo.Error{Code: topo.NoNode, Path: d, Err: errors.New("nobody holds the lock")}
	}
	h := st.Holder
	l := Lock{Dir: d, Holder: h.Contents, Token: h.Token, Session: h.Session, Waiters: entriesOf(st.Waiting), Since: h.Created}
	if tr, ok := topo.ConnAs[SessionTTLReader](conn); ok && h.Session != "" {
		ttl, ok, err := tr.SessionTTL(ctx, h.Session)
		if err != nil {
			return Lock{}, err
		}
		if ok {
			l.TTL = ttl
		}
	}
	return l, nil
}

// Locks returns the held locks on dir (canonical, "" the root) and on the
// directories below it, in walk order (ListDir's order, parents first),
// reading each directory's lock with LockOf: one walk of the subtree and
// one LockOf per directory. Directories under keys no path
// reaches are skipped. Errors are the store's, InvalidPath for a bad dir;
// a directory that vanishes while walking is left out.
func Locks(ctx context.Context, conn topo.Conn, dir string) ([]Lock, error) {
	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return nil, err
	}
	var out []Lock
	var visit func(d string, es []*tree.Entry) error
	visit = func(d string, es []*tree.Entry) error {
		l, err := LockOf(ctx, conn, d)
		switch {
		case err == nil:
			out = append(out, l)
		case !topo.IsErrType(err, topo.NoNode):
			return err
		}
		for _, e := range es {
			if e.Type == topo.TypeDirectory && !topo.IsReserved(e.Path) {
				if err := visit(e.Path, e.Children); err != nil {
					return err
				}
			}
		}
		return nil
	}
	es, err := tree.Entries(ctx, conn, d, tree.EntriesOptions{Recursive: true})
	if err != nil && !topo.IsErrType(err, topo.NoNode) {
		return nil, err
	}
	if err := visit(d, es); err != nil {
		return nil, err
	}
	return out, nil
}

// Election is an election and its leader, as Elections finds them.
type Election struct {
	// Name is the election's name; Leader its current leader (an empty
	// ID when nobody leads).
	Name   string
	Leader topo.Leader
	// Candidates are the election's candidates in the order they are
	// served: the leader first (when one leads), then those waiting, next
	// first; Contents is each one's id. nil when the Conn does not read
	// its queue (QueueReader). On Consul a waiting candidate's Contents
	// is "": its queue entry carries no id.
	Candidates []Entry
}

// Elections returns the elections the store holds candidates for (the
// entries of the reserved "elections" directory of the layout, see
// docs/layout-*.md), each with its leader (see Leader) and its
// candidates (through the Conn's QueueReader, one more read, two on
// Consul), parents before the names nested in them. Every entry of the
// directory is listed, as before nested names existed (on ZooKeeper an
// election's directory stays after its last candidate left, and such an
// election is listed with no leader). A nested election name ("svc/a", an
// election of its own: see NewLeaderParticipation) is found by walking
// the directories below and is listed when it has candidates, read
// through the QueueReader (on a Conn without one, when it has a leader);
// this costs one ListDir per directory and one queue read per entry
// below the top level. On ZooKeeper, whose ListDir shows nothing below
// elections/<name>, nested names are not found (read one with Leader). The leader and the candidates are two reads, not
// one snapshot: a change of leader between them may show. A store with no
// election has none. Errors are the store's.
func Elections(ctx context.Context, conn topo.Conn) ([]Election, error) {
	r, queues := topo.ConnAs[QueueReader](conn)
	var out []Election
	var walk func(dir string) error
	walk = func(dir string) error {
		des, err := conn.ListDir(ctx, backendkit.JoinPath(backendkit.ElectionsDirName, dir), true)
		if topo.IsErrType(err, topo.NoNode) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, de := range des {
			if de.Name == backendkit.LocksDirName || de.Name == backendkit.ConsulLockName {
				continue // a queue or a lock key of the layout, never a name
			}
			name := backendkit.JoinPath(dir, de.Name)
			el, found, err := electionOf(ctx, conn, r, queues, name, dir == "")
			if err != nil {
				return err
			}
			if found {
				out = append(out, el)
			}
			if de.Type == topo.TypeDirectory {
				if err := walk(name); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	return out, nil
}

// electionOf reads the election name: its candidates through r (when
// queues) and its leader. Unless always, found is false for a name with
// no candidate (no leader, on a Conn without a QueueReader), which is
// then not read further.
func electionOf(ctx context.Context, conn topo.Conn, r QueueReader, queues bool, name string, always bool) (el Election, found bool, err error) {
	el.Name = name
	if queues {
		st, err := r.Inspect(ctx, claims.Queue{Path: name, Election: true})
		switch {
		case err == nil:
			if st.Held {
				el.Candidates = entriesOf([]claims.Entry{st.Holder})
			}
			el.Candidates = append(el.Candidates, entriesOf(st.Waiting)...)
		case always || !notAnElection(err):
			return el, false, err
		default:
			// Not an election's name on this layout (a candidate's
			// or a value's entry): nothing to list.
			return el, false, nil
		}
		if !always && len(el.Candidates) == 0 {
			return el, false, nil
		}
	}
	el.Leader, err = Leader(ctx, conn, name)
	if err != nil {
		if !always && !queues && notAnElection(err) {
			return el, false, nil
		}
		return el, false, err
	}
	if !always && !queues && el.Leader.ID == "" {
		return el, false, nil
	}
	return el, true, nil
}

// notAnElection reports whether err, from reading a name below the top
// level of the elections directory, says that the name is no election's.
func notAnElection(err error) bool {
	return topo.IsErrType(err, topo.NoNode) || topo.IsErrType(err, topo.InvalidPath) || topo.IsErrType(err, topo.InvalidArgument)
}
