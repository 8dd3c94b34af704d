package zk2topo

import (
	"context"
	"encoding/binary"
	"slices"
	"sync"

	"github.com/go-zookeeper/zk"
)

// What a lock entry's create learns without a request of its own:
//
//   - its Stat (the token): the create is sent as create2 (opcode 15),
//     whose answer carries the Stat; go-zookeeper has no create2, so the
//     connection rewrites the opcode of registered creates and keeps the
//     Stat of their answers;
//   - the queue: the "locks" znode's children, read pipelined behind a
//     create there (a snapshot showing the new entry was read after its
//     create, whichever create's frame it followed);
//   - the watch behind Done: when the session has no other entry there,
//     that read sets a children watch, which sees every change after the
//     create (watchEntry then moves to an exists watch). Otherwise, or
//     without a Stat, an exists with a watch follows the create.
//
// An uncontended Lock costs the create and one pipelined read
// (TestRequestCounts).

// childrenRes is the answer to a children read.
type childrenRes struct {
	names []string // the names (entry names, sorted, once read for a queue)
	st    *zk.Stat // the parent's Stat
	ch    <-chan zk.Event
	err   error
}

// pipelined is the children read Create sent behind its create.
type pipelined struct {
	kids <-chan childrenRes
	stop func()
}

// pipeline registers, before a create under parent on s, the children
// read sent once a create's frame under parent is written (any create's).
// Call stop once the create returned; kids yields the answer, or nothing
// when the read was not sent or failed.
func (c *Conn) pipeline(s *zkSession, p, parent string, watch bool) pipelined {
	sent, unregister := s.obs.expect(opCreate, parent+"/")
	out := make(chan childrenRes, 1)
	quit := make(chan struct{})
	go func() {
		defer close(out)
		select {
		case <-sent:
		case <-quit:
			return
		}
		res := make(chan childrenRes, 1) // written by fn even after do gave up
		err := c.do(context.Background(), p, func() error {
			r, err := readChildren(s.zk, parent, watch)
			if err == nil {
				r.names = entryNames(r.names)
				res <- r
			}
			return err
		})
		if err == nil {
			out <- <-res
		}
	}()
	var once sync.Once
	return pipelined{kids: out, stop: func() {
		once.Do(func() {
			unregister()
			close(quit)
		})
	}}
}

// children returns the pipelined children read when it shows name.
func (pl pipelined) children(name string) (childrenRes, bool) {
	if pl.kids == nil {
		return childrenRes{}, false
	}
	k, ok := <-pl.kids
	return k, ok && k.err == nil && slices.Contains(k.names, name)
}

// drain waits for the pipelined read, if sent, so that none is written
// after Create returned.
func (pl pipelined) drain() {
	if pl.kids != nil {
		for range pl.kids {
		}
	}
}

// createWithStat creates an ephemeral-sequential entry under parentZp on
// s as create2, and returns its path and its Stat's Czxid and
// EphemeralOwner (nil when the answer carried none).
func (s *zkSession) createWithStat(parentZp string, data []byte, acl []zk.ACL) (string, *zk.Stat, error) {
	o, key := s.obs, parentZp+"/"
	o.mu.Lock()
	o.wantStat[key]++
	o.nStat.Add(1)
	o.mu.Unlock()
	node, err := s.zk.Create(key, data, zk.FlagEphemeralSequential, acl)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.wantStat[key]--; o.wantStat[key] == 0 {
		delete(o.wantStat, key)
	}
	st := o.created[node]
	delete(o.created, node)
	if o.nStat.Add(-1) == 0 {
		clear(o.created) // answers whose create had given up
	}
	return node, st, err
}

// statLen is the length of a serialised Stat.
const statLen = 68

// asCreate2 returns the request frame b as a create2 when it is a create
// createWithStat registered, and records its xid.
func (oc *observedConn) asCreate2(b []byte) []byte {
	xid, op := reqHeader(b)
	path, _, ok := jString(b, 12)
	if op != opCreate || !ok {
		return b
	}
	oc.o.mu.Lock()
	want := oc.o.wantStat[string(path)] > 0
	oc.o.mu.Unlock()
	if !want {
		return b
	}
	nb := append([]byte(nil), b...)
	binary.BigEndian.PutUint32(nb[8:12], opCreate2)
	oc.wmu.Lock()
	oc.stat2[xid] = true
	oc.wmu.Unlock()
	return nb
}

// noteCreated keeps, by path, the Czxid and EphemeralOwner of a
// successful create2's answer (body: reply header, path, Stat).
func (o *sessionObserver) noteCreated(body []byte) {
	if len(body) < 20 || binary.BigEndian.Uint32(body[12:16]) != 0 {
		return
	}
	path, end, ok := jString(body, 16)
	if !ok || end+statLen > len(body) {
		return
	}
	b := body[end:] // czxid (8), mzxid, ctime, mtime, version, cversion, aversion, ephemeralOwner (at 44)
	st := &zk.Stat{Czxid: int64(binary.BigEndian.Uint64(b)), EphemeralOwner: int64(binary.BigEndian.Uint64(b[44:]))}
	o.mu.Lock()
	if o.nStat.Load() > 0 {
		o.created[string(path)] = st
	}
	o.mu.Unlock()
}
