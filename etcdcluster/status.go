package etcdcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrInvalidSize is wrapped by SetSize's error for a size below 1; nothing
// is written then.
var ErrInvalidSize = errors.New("etcdcluster: ideal size must be at least 1")

// MaxVoters is the largest ideal size SetSize accepts: etcd advises at
// most 7 voting members (each more slows every write and adds no
// availability worth it). SetSizeForce stores larger ones.
const MaxVoters = 7

// ErrSizeTooLarge is wrapped by SetSize's error for a size above
// MaxVoters; nothing is written then.
var ErrSizeTooLarge = errors.New("etcdcluster: ideal size above 7 voting members, which etcd advises against")

// volunteerInfo is the JSON value of a volunteer key.
type volunteerInfo struct {
	Name      string `json:"name"`
	PeerURL   string `json:"peerURL"`
	ClientURL string `json:"clientURL"`
}

// Nominee is the membership change in flight, the JSON value of the
// nominee key: a volunteer the decider is adding as a learner.
type Nominee struct {
	// Name and PeerURL identify the volunteer.
	Name    string `json:"name"`
	PeerURL string `json:"peerURL"`
	// MemberID is the learner's etcd member ID, hexadecimal; empty until
	// the learner was added.
	MemberID string `json:"memberID,omitempty"`
	// Decider is the id of the decider that nominated it.
	Decider string `json:"decider"`
	// NominatedAt is the decider's clock when it nominated it (RFC 3339).
	NominatedAt time.Time `json:"nominatedAt"`
}

// MemberStatus is one etcd member as Status sees it.
type MemberStatus struct {
	ID         string   `json:"id"` // hexadecimal member ID
	Name       string   `json:"name"`
	PeerURLs   []string `json:"peerURLs"`
	ClientURLs []string `json:"clientURLs"`
	// Learner is true for a non-voting member (a nominee catching up).
	Learner bool `json:"learner"`
	// Started is false for a member that was added but never ran.
	Started bool `json:"started"`
	// Healthy is true when the member answered a status request.
	Healthy bool `json:"healthy"`
	// Leader is true for the Raft leader.
	Leader bool `json:"leader"`
	// RaftTerm, RaftIndex and RaftAppliedIndex are from the member's own
	// status answer (0 when it did not answer).
	RaftTerm         uint64 `json:"raftTerm"`
	RaftIndex        uint64 `json:"raftIndex"`
	RaftAppliedIndex uint64 `json:"raftAppliedIndex"`
	// Revision is the member's store revision.
	Revision int64 `json:"revision"`
	// Error is why the member did not answer.
	Error string `json:"error,omitempty"`
}

// ClusterStatus is the state of a self-clustering etcd cluster, as Status
// returns it; it marshals to JSON as is.
type ClusterStatus struct {
	Members []MemberStatus `json:"members"`
	// Leader is the Raft leader's name ("" when none answered as leader).
	Leader string `json:"leader"`
	// Decider is the id ("<name>/<nonce>") of the current decider, "" when
	// none. Without a quorum (Stale) it is the decider the stale read
	// names only when that node is a member that answered; otherwise
	// Decider is "" and UnconfirmedDecider names it.
	Decider string `json:"decider"`
	// UnconfirmedDecider is, without a quorum (Stale), the decider the
	// stale read names when its node is not a member that answered (it
	// may have died: nothing then says it decides, and no membership
	// change happens before a quorum runs again); "" otherwise.
	UnconfirmedDecider string `json:"unconfirmedDecider,omitempty"`
	// Volunteers are the names of the nodes whose volunteer key exists.
	Volunteers []string `json:"volunteers"`
	// IdealSize is the stored ideal size (DefaultIdealSize when unset).
	IdealSize int `json:"idealSize"`
	// Nominee is the change in flight, nil when none.
	Nominee *Nominee `json:"nominee,omitempty"`
	// ClusterID is the etcd cluster ID (hexadecimal) of the member that
	// answered the member list. Every bootstrap makes a new one, so two
	// clusters never share it.
	ClusterID string `json:"clusterID"`
	// Healthy is true when a quorum of the voting members answered and
	// one of them is the leader. It says nothing about the ideal size:
	// see Shortfall.
	Healthy bool `json:"healthy"`
	// Shortfall says plainly why the cluster cannot reach its ideal size
	// (fewer volunteers, members included, than IdealSize), "" when it
	// can, and "" for an etcd no decider or volunteer manages (no
	// "serve --cluster" or "--seeds" node: nothing resizes it).
	Shortfall string `json:"shortfall,omitempty"`
	// Stale is true when the member list and the keys could not be read
	// through a quorum (within quorumWait) and were read from whichever
	// member answered (serializable reads, possibly out of date): a
	// cluster without a quorum. Healthy is then false unless the members'
	// own answers show a leader and a quorum.
	Stale bool `json:"stale,omitempty"`
}

// NoQuorum, when the status shows no quorum of answering voters with a
// leader, says so and what to do; "" otherwise.
func (s *ClusterStatus) NoQuorum() string {
	if s.Healthy {
		return ""
	}
	voters, answering := 0, 0
	var down []string
	for _, m := range s.Members {
		if m.Learner {
			continue
		}
		voters++
		if m.Healthy {
			answering++
		} else {
			down = append(down, dashName(m.Name, m.ID))
		}
	}
	if answering >= voters/2+1 && s.Leader != "" {
		return ""
	}
	what := fmt.Sprintf("%d of %d voters answer", answering, voters)
	if answering >= voters/2+1 {
		what += " but none leads (an election may be under way)"
	}
	if len(down) == 0 {
		return "no quorum: " + what + ": writes and linearizable reads wait until a majority of the voters runs with a leader"
	}
	return fmt.Sprintf("no quorum: %s (not answering: %s): writes and linearizable reads wait until a majority of the voters runs; "+
		"start the members that stopped with their data directories (a member whose data is lost cannot count: then restore the cluster from a snapshot, etcd's disaster recovery)",
		what, strings.Join(down, ", "))
}

// quorumWait bounds Status's linearizable member list before it reads
// from any member instead (a cluster without a quorum answers none).
const quorumWait = 2 * time.Second

// Voters returns the names of the started voting members, sorted.
func (s *ClusterStatus) Voters() []string {
	var out []string
	for _, m := range s.Members {
		if !m.Learner && m.Started {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out
}

// Status reads the cluster's state through cli: the member list, each
// member's own status (asked at its first client URL, within a second),
// and the cluster's keys under prefix (DefaultPrefix when empty). When
// the member list cannot be read through a quorum within 2 s (no
// quorum), the list and the keys are read from any member that answers
// (ClusterStatus.Stale; NoQuorum says what is wrong). It returns an error
// only when no member answers (a member restarted after an outage serves
// nothing until a quorum runs; the error says so), at once wrapping
// ErrWaitingForCluster when a node waiting for a cluster to form answers
// at cli's endpoints instead; an unreachable member is reported in its
// MemberStatus. The members are asked without credentials: StatusWith
// takes those of a cluster with TLS or auth.
func Status(ctx context.Context, cli *clientv3.Client, prefix string) (*ClusterStatus, error) {
	return StatusWith(ctx, cli, prefix, ClientOptions{})
}

// StatusWith is Status asking each member for its own status with the
// credentials of opts (those cli was opened with, see NewClientWith).
func StatusWith(ctx context.Context, cli *clientv3.Client, prefix string, opts ClientOptions) (*ClusterStatus, error) {
	k := keys{prefix: cleanPrefix(prefix)}
	// A node waiting for a cluster to form answers no member list: ask
	// the endpoints, meanwhile, whether such a node answers there.
	lctx, stopList := context.WithCancel(ctx)
	defer stopList()
	waiting := make(chan error, 1)
	go func() { waiting <- waitingNodes(lctx, cli.Endpoints(), opts) }()
	type listed struct {
		ml    *clientv3.MemberListResponse
		err   error
		stale bool
	}
	lists := make(chan listed, 1)
	go func() {
		qctx, cancel := context.WithTimeout(lctx, quorumWait)
		ml, err := cli.MemberList(qctx)
		cancel()
		stale := false
		if err != nil && lctx.Err() == nil {
			// No quorum (or none within quorumWait): what any member knows.
			if sml, serr := cli.MemberList(lctx, clientv3.WithSerializable()); serr == nil {
				ml, err, stale = sml, nil, true
			}
		}
		lists <- listed{ml, err, stale}
	}()
	var l listed
	select {
	case l = <-lists:
		if l.err != nil {
			// Say why, when a waiting node answered instead.
			if werr := <-waiting; werr != nil {
				return nil, werr
			}
		}
	case werr := <-waiting:
		if werr != nil {
			stopList()
			<-lists
			return nil, werr
		}
		l = <-lists
	}
	ml, err, stale := l.ml, l.err, l.stale
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("etcdcluster: member list: %w (no member answered: a member restarted from its data serves clients only once a majority of its cluster's voters runs, so start its other members)", err)
		}
		return nil, fmt.Errorf("etcdcluster: member list: %w", err)
	}
	ecs := endpointClients{opts: opts}
	defer ecs.close()
	st := &ClusterStatus{IdealSize: DefaultIdealSize, Volunteers: []string{}, Stale: stale}
	var clusterID uint64
	if ml.Header != nil {
		clusterID = ml.Header.ClusterId
		st.ClusterID = fmt.Sprintf("%x", clusterID)
	}
	voters, healthyVoters := 0, 0
	leaderSeen := false
	for _, m := range ml.Members {
		ms := MemberStatus{
			ID: fmt.Sprintf("%x", m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs,
			Learner: m.IsLearner, Started: m.Name != "",
		}
		if !m.IsLearner {
			voters++
		}
		if len(m.ClientURLs) > 0 {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			sr, err := ecs.status(sctx, m.ClientURLs[0])
			cancel()
			if err == nil && sr.Header != nil && clusterID != 0 && sr.Header.ClusterId != clusterID {
				err = fmt.Errorf("%s is served by another etcd cluster (%x, not %x): a member that lost its data and bootstrapped anew?", m.ClientURLs[0], sr.Header.ClusterId, clusterID)
			}
			if err != nil {
				ms.Error = err.Error()
			} else {
				ms.Healthy = true
				ms.Leader = sr.Leader == m.ID
				ms.RaftTerm, ms.RaftIndex, ms.RaftAppliedIndex = sr.RaftTerm, sr.RaftIndex, sr.RaftAppliedIndex
				ms.Revision = sr.Header.Revision
				if ms.Leader {
					st.Leader = m.Name
					leaderSeen = true
				}
				if !m.IsLearner {
					healthyVoters++
				}
			}
		}
		st.Members = append(st.Members, ms)
	}
	slices.SortFunc(st.Members, func(a, b MemberStatus) int { return strings.Compare(a.Name+a.ID, b.Name+b.ID) })
	st.Healthy = leaderSeen && healthyVoters >= voters/2+1

	var ser []clientv3.OpOption
	if stale {
		// A transaction of serializable reads is answered by the member
		// itself, without a quorum.
		ser = append(ser, clientv3.WithSerializable())
	}
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(k.size(), ser...),
		clientv3.OpGet(k.volunteers(), append([]clientv3.OpOption{clientv3.WithPrefix()}, ser...)...),
		clientv3.OpGet(k.nominee(), ser...),
		clientv3.OpGet(k.deciderPrefix(), append(clientv3.WithFirstCreate(), ser...)...),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("etcdcluster: reading cluster keys: %w", err)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		if n, err := strconv.Atoi(string(kvs[0].Value)); err == nil && n >= 1 {
			st.IdealSize = n
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		st.Volunteers = append(st.Volunteers, strings.TrimPrefix(string(kv.Key), k.volunteers()))
	}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		var n Nominee
		if json.Unmarshal(kvs[0].Value, &n) == nil {
			st.Nominee = &n
		}
	}
	if kvs := resp.Responses[3].GetResponseRange().Kvs; len(kvs) > 0 {
		st.Decider = string(kvs[0].Value)
	}
	if stale && st.Decider != "" && !st.answers(deciderNode(st.Decider)) {
		// Not presented as deciding a node that cannot be reached.
		st.UnconfirmedDecider, st.Decider = st.Decider, ""
	}
	// Only a cluster something manages (a decider, volunteers) has a
	// size to fall short of: a plain etcd keeps the members it has.
	managed := st.Decider != "" || st.UnconfirmedDecider != "" || len(st.Volunteers) > 0
	if managed && len(st.Volunteers) < st.IdealSize {
		st.Shortfall = shortfall(st.IdealSize, len(st.Volunteers), len(st.Voters()))
	}
	return st, nil
}

// ErrWaitingForCluster is wrapped by Status's and StatusWith's error when
// an endpoint of the client is a node still waiting for a cluster to form
// (started with seeds and Config.BootstrapExpect, before any member
// answers at its seeds: it serves no etcd yet) and no etcd member answers
// at the client's endpoints. The error names the node, its seeds, the
// number of nodes it waits for and the ones it sees. It is returned as
// soon as the node answered, without waiting for the member list.
var ErrWaitingForCluster = errors.New("etcdcluster: no etcd member answers, only a node waiting for a cluster to form")

// waitingNodes asks each of endpoints (within a second each) whether a
// node waiting for a cluster answers there, and returns an error wrapping
// ErrWaitingForCluster describing them when one does and no etcd member
// answers at any; nil otherwise (or when ctx ends).
func waitingNodes(ctx context.Context, endpoints []string, opts ClientOptions) error {
	tc, err := opts.tlsConfig()
	if err != nil {
		return nil // the member list says what is wrong
	}
	eps := normalizeEndpoints(endpoints, tc != nil)
	hc := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: tc, DisableKeepAlives: true}}
	defer hc.CloseIdleConnections()
	states := make([]seedState, len(eps))
	infos := make([]*candidateInfo, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() { states[i], infos[i] = probeSeed(ctx, hc, ep) })
	}
	wg.Wait()
	if ctx.Err() != nil || slices.Contains(states, seedMember) {
		return nil
	}
	var says []string
	for i, c := range infos {
		if c == nil {
			continue
		}
		say := fmt.Sprintf("%s is node %s", eps[i], c.Name)
		if len(c.Seeds) > 0 {
			say += fmt.Sprintf(": no etcd member answers at its seeds (%s)", strings.Join(c.Seeds, ","))
		}
		if c.Expect > 0 {
			say += fmt.Sprintf("; it bootstraps a cluster once %d nodes started with the same --bootstrap-expect %d see each other", c.Expect, c.Expect)
			if len(c.Sees) > 0 {
				say += fmt.Sprintf(" (it sees %d: %s)", len(c.Sees), strings.Join(c.Sees, ", "))
			}
		}
		if c.Vote != "" {
			say += fmt.Sprintf(", endorsing %s to bootstrap", c.Vote)
		}
		says = append(says, say)
	}
	if len(says) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s: start the other nodes with the same seeds and --bootstrap-expect, or give it the client URL of a running member as a seed",
		ErrWaitingForCluster, strings.Join(says, "; "))
}

// deciderNode returns the node name of a decider id ("<name>/<nonce>").
func deciderNode(id string) string {
	if i := strings.LastIndex(id, "/"); i >= 0 {
		return id[:i]
	}
	return id
}

// answers reports whether the member named name answered its status
// request.
func (s *ClusterStatus) answers(name string) bool {
	return slices.ContainsFunc(s.Members, func(m MemberStatus) bool { return m.Name == name && m.Healthy })
}

// shortfall is Status.Shortfall of a cluster of the given ideal size with
// fewer volunteers than that.
func shortfall(ideal, volunteers, voters int) string {
	plural := func(n int, one, many string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, one)
		}
		return fmt.Sprintf("%d %s", n, many)
	}
	return fmt.Sprintf("the ideal size is %d voters but only %s (%s now): start %s or lower the size",
		ideal, plural(volunteers, "node volunteers", "nodes volunteer"), plural(voters, "voter", "voters"),
		plural(ideal-volunteers, "more node", "more nodes"))
}

// SetSize stores n as the cluster's ideal number of voting members; the
// decider converges to it (one member at a time). It returns an error
// wrapping ErrInvalidSize for n < 1 and ErrSizeTooLarge for n >
// MaxVoters (nothing written then), or the etcd error. An even n is
// accepted, though it tolerates no more failures than n-1.
func SetSize(ctx context.Context, cli *clientv3.Client, prefix string, n int) error {
	return SetSizeWith(ctx, cli, prefix, n, SizeOptions{})
}

// SetSizeForce is SetSize without the MaxVoters limit.
func SetSizeForce(ctx context.Context, cli *clientv3.Client, prefix string, n int) error {
	return SetSizeWith(ctx, cli, prefix, n, SizeOptions{Force: true})
}

// SizeOptions are SetSizeWith's options.
type SizeOptions struct {
	// Force accepts a size above MaxVoters.
	Force bool
	// Client holds the credentials cli was opened with (see
	// NewClientWith), used to ask cli's endpoints whether a node waiting
	// for a cluster to form answers there.
	Client ClientOptions
}

// SetSizeWith is SetSize (SetSizeForce with opts.Force) that, while the
// write waits for an answer, asks cli's endpoints whether a node waiting
// for a cluster to form answers there instead of an etcd member: if so it
// stops waiting and returns an error wrapping ErrWaitingForCluster (as
// StatusWith does; such a node serves no etcd, so nothing was stored
// there) instead of waiting until ctx ends.
func SetSizeWith(ctx context.Context, cli *clientv3.Client, prefix string, n int, opts SizeOptions) error {
	if n < 1 {
		return fmt.Errorf("%w: got %d", ErrInvalidSize, n)
	}
	if n > MaxVoters && !opts.Force {
		return fmt.Errorf("%w: got %d", ErrSizeTooLarge, n)
	}
	k := keys{prefix: cleanPrefix(prefix)}
	err := unlessWaiting(ctx, cli, opts.Client, func(ctx context.Context) error {
		_, err := cli.Put(ctx, k.size(), strconv.Itoa(n))
		return err
	})
	if err != nil && !errors.Is(err, ErrWaitingForCluster) {
		return fmt.Errorf("etcdcluster: storing the ideal size: %w", err)
	}
	return err
}

// unlessWaiting runs call while asking cli's endpoints whether only nodes
// waiting for a cluster to form answer there (waitingNodes). When they do,
// call's context is cancelled unless call already ended, and the waiting
// nodes' error is returned in place of call's error; otherwise call's
// result is returned.
func unlessWaiting(ctx context.Context, cli *clientv3.Client, opts ClientOptions, call func(context.Context) error) error {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waiting := make(chan error, 1)
	go func() { waiting <- waitingNodes(cctx, cli.Endpoints(), opts) }()
	done := make(chan error, 1)
	go func() { done <- call(cctx) }()
	select {
	case err := <-done:
		if err != nil {
			if werr := <-waiting; werr != nil {
				return werr
			}
		}
		return err
	case werr := <-waiting:
		if werr == nil {
			return <-done
		}
		cancel()
		if err := <-done; err == nil {
			return nil
		}
		return werr
	}
}

func cleanPrefix(p string) string {
	if strings.Trim(p, "/") == "" {
		return DefaultPrefix
	}
	return "/" + strings.Trim(p, "/")
}
