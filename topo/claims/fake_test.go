package claims_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/claims"
)

// store is the engine tests' in-process store: queues of entries under one
// mutex, with counters of the driver's requests.
type store struct {
	mu sync.Mutex
	// failDeletes is how many more Delete requests to refuse, as an
	// unreachable store does.
	failDeletes int
	rev         int64
	queues      map[string][]*fentry
	changed     chan struct{}
	lists       int // List requests served
	waiting     int // WaitGone calls blocked on an entry
}

type fentry struct {
	e    claims.Entry
	sess *claims.Session
	gone chan struct{}
}

func newStore() *store {
	return &store{queues: map[string][]*fentry{}, changed: make(chan struct{})}
}

func (s *store) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

var errUnreachable = errors.New("fake store: unreachable")

// driver is one Conn's driver: its current session is sess.
type driver struct {
	s    *store
	mu   sync.Mutex
	sess *claims.Session
	n    int
}

func key(q claims.Queue) string {
	return strconv.FormatBool(q.Election) + strconv.FormatBool(q.Native) + ":" + q.Path
}

// session returns the driver's live session, opening one when needed.
func (d *driver) session() *claims.Session {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sess == nil || d.sess.IsLost() {
		d.n++
		d.sess = claims.NewSession("s"+strconv.Itoa(d.n), nil)
	}
	return d.sess
}

// expire declares the current session lost, then drops its entries.
func (d *driver) expire() {
	d.mu.Lock()
	sess := d.sess
	d.mu.Unlock()
	if sess == nil {
		return
	}
	sess.Lost()
	d.s.mu.Lock()
	defer d.s.mu.Unlock()
	for k, q := range d.s.queues {
		d.s.queues[k] = slices.DeleteFunc(q, func(x *fentry) bool {
			if x.sess == sess {
				close(x.gone)
				return true
			}
			return false
		})
	}
	d.s.notify()
}

func (d *driver) Create(ctx context.Context, q claims.Queue, contents string, o claims.CreateOptions) (claims.Entry, *claims.Session, error) {
	sess := d.session()
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if qq := s.queues[key(q)]; o.Exclusive && len(qq) > 0 {
		return claims.Entry{}, nil, &claims.BusyError{Head: qq[0].e}
	}
	s.rev++
	e := claims.Entry{Token: s.rev, Key: key(q) + "/" + strconv.FormatInt(s.rev, 10), Session: sess.ID(), Contents: contents, Value: o.Value}
	s.queues[key(q)] = append(s.queues[key(q)], &fentry{e: e, sess: sess, gone: make(chan struct{})})
	s.notify()
	return e, sess, nil
}

func (d *driver) List(ctx context.Context, q claims.Queue) ([]claims.Entry, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lists++
	var out []claims.Entry
	for _, x := range s.queues[key(q)] {
		out = append(out, x.e)
	}
	return out, nil
}

func (d *driver) find(q claims.Queue, e claims.Entry) (int, *fentry) {
	for i, x := range d.s.queues[key(q)] {
		if x.e.Token == e.Token {
			return i, x
		}
	}
	return -1, nil
}

func (d *driver) WaitGone(ctx context.Context, q claims.Queue, e claims.Entry) error {
	s := d.s
	s.mu.Lock()
	_, x := d.find(q, e)
	if x == nil {
		s.mu.Unlock()
		return nil
	}
	s.waiting++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
	}()
	select {
	case <-x.gone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *driver) Delete(ctx context.Context, q claims.Queue, sess *claims.Session, e claims.Entry) error {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failDeletes > 0 {
		s.failDeletes--
		return errUnreachable
	}
	i, x := d.find(q, e)
	if x == nil || x.sess != sess {
		return claims.ErrNotHeld
	}
	s.queues[key(q)] = slices.Delete(s.queues[key(q)], i, i+1)
	close(x.gone)
	s.notify()
	return nil
}

func (d *driver) Held(ctx context.Context, q claims.Queue, sess *claims.Session, e claims.Entry) (bool, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	i, x := d.find(q, e)
	return i == 0 && x.sess == sess && !sess.IsLost(), nil
}

func (d *driver) Head(ctx context.Context, q claims.Queue, watch bool) (claims.Entry, bool, <-chan struct{}, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	var ch <-chan struct{}
	if watch {
		ch = s.changed
	}
	if qq := s.queues[key(q)]; len(qq) > 0 {
		return qq[0].e, true, ch, nil
	}
	return claims.Entry{}, false, ch, nil
}

func (d *driver) SetValue(ctx context.Context, q claims.Queue, sess *claims.Session, e claims.Entry, value []byte) error {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	_, x := d.find(q, e)
	if x == nil || x.sess != sess {
		return claims.ErrNotHeld
	}
	s.rev++
	x.e.Value, x.e.ValueRev = value, s.rev
	s.notify()
	return nil
}

func (d *driver) ResumeInfo(q claims.Queue, sess *claims.Session, e claims.Entry) ([]byte, error) {
	return []byte(strconv.FormatInt(e.Token, 10)), nil
}

func (d *driver) Resume(ctx context.Context, q claims.Queue, id string, info []byte) (claims.Entry, *claims.Session, error) {
	return claims.Entry{}, nil, backendkit.Wrap(topo.InvalidArgument, q.Path, errors.New("no resume in this store"))
}

func (d *driver) MapError(ctx context.Context, err error, path string) error {
	return backendkit.MapError(ctx, err, path, false, func(error) topo.ErrorCode { return topo.Unavailable })
}
