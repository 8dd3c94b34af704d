package zk2topo

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/go-zookeeper/zk"
)

// Reads pipelined behind a lock entry's create: ZooKeeper runs one
// session's requests in the order it receives them, so a read sent on the
// session once the create's frame is written is answered after the create
// (and shows its entry) without a round trip of its own. Create sends two:
//
//   - the queue's children, when they will be used (TryLock, or the
//     engine's first List: see stashValid); a snapshot that shows the new
//     entry was read after its create, whichever create's frame it
//     followed;
//   - an exists, with a watch, of the name the Conn predicts the entry
//     gets (it released the previous entry in that "locks" znode, and
//     ZooKeeper numbers sequential children with a counter each create
//     raises by one; deletes do not): its Stat gives the token and its
//     watch is the one behind Done, used only when the create got that
//     name and was the session's one create under the parent since the
//     read was registered (so the frame it followed was ours). Otherwise
//     the exists is sent when the create returns, one more round trip.
//
// BenchmarkLockUnlock and BenchmarkTryLockUnlock measure what they save:
// an uncontended Lock waits one round trip instead of two.

// childrenRes is the answer to a children read.
type childrenRes struct {
	names []string // entry names, sorted
	err   error
}

// pipelined is what Create sent behind its create (see pipeline).
type pipelined struct {
	started   uint64 // creates the session had started under the parent
	inFlight  int    // and had in flight, when the reads were registered
	predicted string // the predicted entry, "" for none
	stat      <-chan entryStat
	kids      <-chan childrenRes
	stop      func()
}

// pipeline registers the reads of a lock entry's create under parent on
// session s (list: the children too) before the create is sent. stop
// must be called once the create returned.
func (c *Conn) pipeline(ctx context.Context, s *zkSession, p, parent string, list bool) pipelined {
	var pl pipelined
	pl.started, pl.inFlight = s.createState(parent)
	var stops []func()
	if v, ok := c.seqHints.LoadAndDelete(parent); ok {
		pl.predicted = fmt.Sprintf("%s/%0*d", parent, seqLen, v.(int64))
		ch, stop := behindCreate(c, s, p, parent, func(z *zk.Conn) (entryStat, error) {
			exists, st, w, err := z.ExistsW(pl.predicted)
			return entryStat{exists: exists, st: st, ch: w}, err
		})
		pl.stat, stops = ch, append(stops, stop)
	}
	if list {
		ch, stop := behindCreate(c, s, p, parent, func(z *zk.Conn) (childrenRes, error) {
			children, _, err := z.Children(parent)
			return childrenRes{names: entryNames(children)}, err
		})
		pl.kids, stops = ch, append(stops, stop)
	}
	pl.stop = func() {
		for _, f := range stops {
			f()
		}
	}
	return pl
}

// token returns the pipelined Stat of node, the entry session s's create
// made, when it is surely node's (see pipeline).
func (pl pipelined) token(s *zkSession, parent, node string) (entryStat, bool) {
	if pl.stat == nil || node != pl.predicted || pl.inFlight != 0 {
		return entryStat{}, false
	}
	if now, _ := s.createState(parent); now != pl.started+1 {
		return entryStat{}, false
	}
	r, ok := <-pl.stat
	return r, ok && r.owned(s)
}

// children returns the pipelined children read when it shows name.
func (pl pipelined) children(name string) (childrenRes, bool) {
	if pl.kids == nil {
		return childrenRes{}, false
	}
	k, ok := <-pl.kids
	return k, ok && k.err == nil && slices.Contains(k.names, name)
}

// drain waits for the pipelined reads that were sent (those that were
// not are closed by stop), so that none is written after Create returned.
func (pl pipelined) drain() {
	if pl.stat != nil {
		for range pl.stat {
		}
	}
	if pl.kids != nil {
		for range pl.kids {
		}
	}
}

// behindCreate sends read on session s once a create's frame under
// parent was written there; the channel yields its answer, or nothing
// when it was not sent (stop came first) or failed.
func behindCreate[T any](c *Conn, s *zkSession, p, parent string, read func(z *zk.Conn) (T, error)) (<-chan T, func()) {
	sent, unregister := s.obs.expect(opCreate, parent+"/")
	out := make(chan T, 1)
	quit := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-sent:
		case <-quit:
			return
		}
		res := make(chan T, 1) // written by fn even after do gave up
		err := c.do(context.Background(), p, func() error {
			v, err := read(s.zk)
			if err == nil {
				res <- v
			}
			return err
		})
		if err == nil {
			out <- <-res
		}
	}()
	var once sync.Once
	return out, func() {
		once.Do(func() {
			unregister()
			close(quit)
		})
	}
}

// noteReleased records, after this Conn deleted its lock entry node, the
// name the next entry under the same "locks" znode gets if nobody else
// creates one there meanwhile (see pipeline). A wrong guess costs nothing
// but the exists sent after the create.
func (c *Conn) noteReleased(node string) {
	if len(node) < seqLen {
		return
	}
	seq, err := strconv.ParseInt(node[len(node)-seqLen:], 10, 64)
	if err != nil || seq+1 > math.MaxInt32 {
		return
	}
	c.seqHints.Store(zkDir(node), seq+1)
}

// createState returns how many entry creates under parentZp the session
// has started, and how many are in flight.
func (s *zkSession) createState(parentZp string) (started uint64, inFlight int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates[parentZp], s.pending[parentZp]
}
