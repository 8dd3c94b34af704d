package etcdcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Failover timing of the key-value requests of OpenConn's client.
const (
	// stallAfter is how long a key-value request may run before its
	// client checks the members' health, and how often it checks again
	// while the request runs on.
	stallAfter = 300 * time.Millisecond
	// stallAfterFailing replaces stallAfter while a check found the
	// members unhealthy less than failingFor ago (a failover is under way:
	// requests forwarded to a lost leader are lost until a new one is
	// elected).
	stallAfterFailing = 100 * time.Millisecond
	failingFor        = 3 * time.Second
	// probeTimeout bounds each member's answer to that check: a member
	// that does not answer within it counts as stopped.
	probeTimeout = 500 * time.Millisecond
	// probeReuse is how long one check's answers serve the other
	// requests that stall meanwhile.
	probeReuse = 150 * time.Millisecond
	// notAppliedBackoff is the pause before a request refused without
	// being applied (no leader yet) is sent again.
	notAppliedBackoff = 50 * time.Millisecond
	// maxRetrying bounds how long a request is sent again (within its
	// context): after it, the last error is returned.
	maxRetrying = 5 * time.Second
)

// errStalled is the cause with which a stalled attempt is abandoned.
var errStalled = errors.New("etcdcluster: request abandoned")

// failover is the gRPC unary interceptor of OpenConn's client that keeps
// key-value requests from waiting out their whole deadline on a member
// that stopped answering or lost its leader (see the package doc,
// "Clients"). Safe for concurrent use.
type failover struct {
	ecs *endpointClients
	cli atomic.Pointer[clientv3.Client] // set once the client exists

	term atomic.Uint64 // the highest raft term an answer carried
	// failingSince is when a check last found the members unhealthy
	// (UnixNano; 0: never).
	failingSince atomic.Int64

	mu      sync.Mutex
	members map[uint64]string // member ID -> a client URL, from the last member list

	probeMu   sync.Mutex // serialises probes; guards the fields below
	probedAt  time.Time
	probed    []probeAnswer
	probedEps []string
}

// probeAnswer is one member's answer to a health check (sr nil: none).
type probeAnswer struct {
	ep string
	sr *pb.StatusResponse
}

// requestKind says how a request may be sent again after an attempt was
// abandoned.
type requestKind int

const (
	kindOther requestKind = iota // not a key-value request: passed through
	kindRead                     // reads only: sent again freely
	kindCAS                      // a compare-and-set that at most one attempt can apply: sent again
	kindWrite                    // any other write: never sent again once it may have been applied
)

// classify returns the kind of request req.
func classify(req any) requestKind {
	switch r := req.(type) {
	case *pb.RangeRequest:
		if r.Serializable {
			return kindOther // served by any member, leader or not
		}
		return kindRead
	case *pb.PutRequest, *pb.DeleteRangeRequest:
		return kindWrite
	case *pb.TxnRequest:
		if readOnly(r.Success) && readOnly(r.Failure) {
			return kindRead
		}
		if consumesCompare(r) {
			return kindCAS
		}
		return kindWrite
	}
	return kindOther
}

// readOnly reports whether ops only read.
func readOnly(ops []*pb.RequestOp) bool {
	for _, op := range ops {
		if op.GetRequestRange() == nil {
			return false
		}
	}
	return true
}

// consumesCompare reports whether at most one of any number of attempts
// of txn can take its success branch: a compare asks that one key's
// ModRevision equals a positive revision and the success branch writes
// or deletes that very key (after which its ModRevision is higher, or
// the key absent, for ever), and the failure branch only reads.
func consumesCompare(txn *pb.TxnRequest) bool {
	if !readOnly(txn.Failure) {
		return false
	}
	for _, c := range txn.Compare {
		if c.Target != pb.Compare_MOD || c.Result != pb.Compare_EQUAL || c.GetModRevision() <= 0 || len(c.RangeEnd) > 0 {
			continue
		}
		for _, op := range txn.Success {
			if p := op.GetRequestPut(); p != nil && bytes.Equal(p.Key, c.Key) {
				return true
			}
			if d := op.GetRequestDeleteRange(); d != nil && len(d.RangeEnd) == 0 && bytes.Equal(d.Key, c.Key) {
				return true
			}
		}
	}
	return false
}

// outcomeUnknown is the error of a write abandoned when it may or may not
// have been applied: Unavailable, so that etcd2topo reports Unavailable.
func outcomeUnknown(why string) error {
	return status.Errorf(codes.Unavailable,
		"etcdcluster: the write was abandoned (%s); it may or may not have been applied: read the file back", why)
}

// notApplied reports whether err is a refusal that etcd gives before it
// proposes the request (so the request was not applied): no leader (the
// client asks for one), or a proposal raft dropped for want of a leader.
func notApplied(err error) bool {
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	msg := s.Message()
	return (s.Code() == codes.Unavailable && msg == "etcdserver: no leader") ||
		strings.Contains(msg, "raft proposal dropped")
}

// unary is the interceptor: see the package doc, "Clients".
func (f *failover) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	kind := classify(req)
	if kind == kindOther {
		err := invoker(ctx, method, req, reply, cc, opts...)
		if err == nil {
			f.noteTerm(reply)
		}
		return err
	}
	// A member without a leader refuses at once instead of waiting.
	ctx = clientv3.WithRequireLeader(ctx)
	start := time.Now()
	mayHaveApplied := false // an abandoned attempt of a compare-and-set
	for {
		why, err := f.attempt(ctx, method, req, reply, cc, invoker, opts)
		switch {
		case err == nil:
			f.noteTerm(reply)
			if mayHaveApplied && !reply.(*pb.TxnResponse).Succeeded {
				// The compare failed: perhaps because the abandoned
				// attempt was applied, perhaps because another client
				// wrote.
				return outcomeUnknown("an earlier attempt stalled and the compare of a later one failed")
			}
			return nil
		case why != "":
			switch kind {
			case kindWrite:
				return outcomeUnknown(why)
			case kindCAS:
				mayHaveApplied = true
				err = outcomeUnknown(why)
			}
		case mayHaveApplied:
			if !notApplied(err) {
				return outcomeUnknown(err.Error())
			}
			err = outcomeUnknown(err.Error())
		case !notApplied(err):
			return err
		}
		if ctx.Err() != nil || time.Since(start) > maxRetrying {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(notAppliedBackoff):
		}
	}
}

// attempt sends req once. When it runs longer than stallAfter it checks
// the members every stallAfter and abandons the request when they say it
// cannot complete (unhealthy); why then says so.
func (f *failover) attempt(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts []grpc.CallOption) (string, error) {
	term0 := f.term.Load()
	actx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var why atomic.Pointer[string]
	done := make(chan struct{})
	watchdog := time.AfterFunc(f.stallAfter(), func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if w := f.unhealthy(actx, term0); w != "" {
				f.failingSince.Store(time.Now().UnixNano())
				why.Store(&w)
				cancel(errStalled)
				return
			}
			select {
			case <-done:
				return
			case <-time.After(f.stallAfter()):
			}
		}
	})
	err := invoker(actx, method, req, reply, cc, opts...)
	close(done)
	watchdog.Stop()
	if w := why.Load(); w != nil && err != nil {
		return *w, err
	}
	return "", err
}

// stallAfter is how long a request runs before the members are checked:
// stallAfterFailing during a failover, stallAfter otherwise.
func (f *failover) stallAfter() time.Duration {
	if t := f.failingSince.Load(); t != 0 && time.Since(time.Unix(0, t)) < failingFor {
		return stallAfterFailing
	}
	return stallAfter
}

// noteTerm records the raft term of an answer's header.
func (f *failover) noteTerm(reply any) {
	h, ok := reply.(interface{ GetHeader() *pb.ResponseHeader })
	if !ok || h.GetHeader() == nil {
		return
	}
	f.raiseTerm(h.GetHeader().RaftTerm)
}

// raiseTerm records raft term t when it is higher than the one recorded.
func (f *failover) raiseTerm(t uint64) {
	for {
		cur := f.term.Load()
		if t <= cur || f.term.CompareAndSwap(cur, t) {
			return
		}
	}
}

// setMembers records the client URLs of members (from a member list).
func (f *failover) setMembers(members []*pb.Member) {
	m := map[uint64]string{}
	for _, mem := range members {
		if len(mem.ClientURLs) > 0 {
			m[mem.ID] = mem.ClientURLs[0]
		}
	}
	f.mu.Lock()
	f.members = m
	f.mu.Unlock()
}

// memberURL returns a client URL of member id, "" when unknown.
func (f *failover) memberURL(id uint64) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.members[id]
}

// unhealthy checks the client's endpoints (each must answer a status
// request within probeTimeout) and returns why a request that has been
// running since the raft term was term0 cannot complete where it was
// sent, "" when nothing says so: a member does not answer (stopped or
// dead), a member has no leader, the term changed (a new leader: a
// request forwarded to the old one is lost), or the leader the members
// follow does not answer. Endpoints that did not answer are taken out of
// the client's endpoints (the member-list follower puts them back once
// they answer).
func (f *failover) unhealthy(ctx context.Context, term0 uint64) string {
	cli := f.cli.Load()
	if cli == nil {
		return ""
	}
	eps := cli.Endpoints()
	answers := f.probe(ctx, eps)
	if ctx.Err() != nil {
		return ""
	}
	var why []string
	var alive []string
	ids := map[uint64]bool{}
	leaders := map[uint64]bool{}
	for _, a := range answers {
		if a.sr == nil || a.sr.Header == nil {
			why = append(why, a.ep+" does not answer")
			continue
		}
		alive = append(alive, a.ep)
		ids[a.sr.Header.MemberId] = true
		// Later requests are judged against the newest term: a request
		// is abandoned for a leader change that happened while it ran,
		// not for one that happened before.
		f.raiseTerm(a.sr.RaftTerm)
		switch {
		case a.sr.Leader == 0:
			why = append(why, a.ep+" has no leader")
		case term0 != 0 && a.sr.RaftTerm > term0:
			why = append(why, fmt.Sprintf("%s is in raft term %d, a new leader since term %d", a.ep, a.sr.RaftTerm, term0))
		default:
			leaders[a.sr.Leader] = true
		}
	}
	for id := range leaders {
		if ids[id] {
			continue
		}
		u := f.memberURL(id)
		if u == "" || slices.Contains(eps, u) {
			// Unknown, or one of the endpoints (that did not answer).
			if u != "" {
				why = append(why, fmt.Sprintf("the leader %x does not answer", id))
			}
			continue
		}
		if a := f.probe(ctx, []string{u}); len(a) == 1 && a[0].sr == nil && ctx.Err() == nil {
			why = append(why, fmt.Sprintf("the leader %x (%s) does not answer", id, u))
		}
	}
	if len(alive) > 0 && len(alive) < len(eps) {
		cli.SetEndpoints(alive...)
	}
	slices.Sort(why)
	return strings.Join(slices.Compact(why), "; ")
}

// probe asks each of eps for its status, at most probeTimeout each, in
// parallel; answers of a probe of the same endpoints less than probeReuse
// old are reused.
func (f *failover) probe(ctx context.Context, eps []string) []probeAnswer {
	f.probeMu.Lock()
	defer f.probeMu.Unlock()
	if time.Since(f.probedAt) < probeReuse && slices.Equal(eps, f.probedEps) {
		return f.probed
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	answers := make([]probeAnswer, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		answers[i].ep = ep
		wg.Go(func() {
			if sr, err := f.ecs.status(pctx, ep); err == nil {
				answers[i].sr = (*pb.StatusResponse)(sr)
			}
		})
	}
	wg.Wait()
	if ctx.Err() == nil {
		f.probedAt, f.probed, f.probedEps = time.Now(), answers, slices.Clone(eps)
	}
	return answers
}
