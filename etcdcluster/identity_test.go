package etcdcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/etcd2topo"
)

// TestLostBootstrapDataNoImpostor wipes the bootstrap node's data
// directory and reruns it with the same command (no seeds): it bootstraps
// a new cluster at its old URLs, which must not share the real cluster's
// identity. The two cluster IDs differ, a client given both endpoints
// refuses them (nothing written), and a new node seeded with both refuses
// to start instead of joining the impostor.
func TestLostBootstrapDataNoImpostor(t *testing.T) {
	h := newHarness(t)
	a := h.start("a")
	h.start("b", "a")
	h.start("c", "a")
	cli := h.client("b", "c")
	waitVoters(t, cli, bound, "a", "b", "c")

	a.kill()
	require.NoError(t, removeAll(a.cfg.DataDir))
	a.run() // the same command: no seeds, no data: bootstraps

	var ecs endpointClients
	defer ecs.close()
	aURL, bURL := a.cfg.ClientURL, h.procs["b"].cfg.ClientURL
	var aID, bID uint64
	eventually(t, bound, "the rerun bootstrap node serves and the real cluster answers", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		sa, err := ecs.status(ctx, aURL)
		if err != nil {
			return false, "a: " + err.Error()
		}
		sb, err := ecs.status(ctx, bURL)
		if err != nil {
			return false, "b: " + err.Error()
		}
		aID, bID = sa.Header.ClusterId, sb.Header.ClusterId
		return true, ""
	})
	require.NotEqual(t, bID, aID, "the rerun bootstrap node has the real cluster's ID")

	// A client with both endpoints refuses them, and writes nothing.
	_, err := OpenConn(etcd2topo.Options{Endpoints: []string{aURL, bURL}}, "/t", 200*time.Millisecond)
	require.Error(t, err)
	require.True(t, errors.Is(err, etcd2topo.ErrClusterMismatch), "%v", err)
	require.True(t, topo.IsErrType(err, topo.InvalidArgument), "%v", err)
	require.ErrorContains(t, err, aURL)
	require.ErrorContains(t, err, bURL)

	_, err = NewClient([]string{bURL, aURL}, 200*time.Millisecond)
	require.ErrorIs(t, err, etcd2topo.ErrClusterMismatch)
	require.ErrorContains(t, err, fmt.Sprintf("%x", aID))
	require.ErrorContains(t, err, fmt.Sprintf("%x", bID))

	// A new node seeded with both URLs refuses to start.
	d := h.start("d", "a", "b")
	select {
	case <-d.done:
	case <-time.After(bound):
		t.Fatal("d, seeded with two clusters, is still running")
	}
	require.Error(t, d.err)
	require.True(t, d.logHas(etcd2topo.ErrClusterMismatch.Error()), "d's log names the mismatch")

	// The client that followed the member list to a's URL before a lost
	// its data never takes the impostor's answers: every put it reports
	// as done is in the real cluster.
	bc, err := ecs.get(bURL)
	require.NoError(t, err)
	ac, err := ecs.get(aURL)
	require.NoError(t, err)
	done := 0
	for i := range 30 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		resp, err := cli.Put(ctx, fmt.Sprintf("/probe/%d", i), "v")
		cancel()
		if err != nil {
			continue
		}
		done++
		require.Equal(t, bID, resp.Header.ClusterId)
	}
	require.Positive(t, done, "no put went through")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	real, err := bc.Get(ctx, "/probe/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, done, real.Count)
	// A put the impostor answered was refused to the caller (the guard
	// sees the answer's cluster ID only after the impostor applied it):
	// the impostor holds only puts the client reported as failed.
	imp, err := ac.Get(ctx, "/probe/", clientv3.WithPrefix())
	require.NoError(t, err)
	for _, kv := range imp.Kvs {
		r, err := bc.Get(ctx, string(kv.Key))
		require.NoError(t, err)
		require.Zero(t, r.Count, "%s is in both clusters", kv.Key)
	}
	var st *ClusterStatus
	eventually(t, bound, "status through the real cluster", func() (bool, string) {
		var desc string
		st, desc = statusOf(cli)
		return st != nil, desc
	})
	require.Equal(t, fmt.Sprintf("%x", bID), st.ClusterID)
	ml, err := bc.MemberList(ctx)
	require.NoError(t, err)
	for _, m := range ml.Members {
		require.NotEqual(t, "d", m.Name)
	}
}

func removeAll(dir string) error { return os.RemoveAll(dir) }

// TestDuplicateNameRefused starts a second node with the name of a
// running voter (other ports, other data directory): it exits with an
// error naming the holder's URLs, and the voter's volunteer key keeps the
// voter's URLs.
func TestDuplicateNameRefused(t *testing.T) {
	h := newHarness(t)
	h.start("a")
	b := h.start("b", "a")
	cli := h.client("a")
	waitVoters(t, cli, bound, "a", "b")

	dup := h.prepare("b2", "a") // fresh ports and data directory
	dup.cfg.Name = "b"
	dup.run()
	select {
	case <-dup.done:
	case <-time.After(bound):
		t.Fatal("a second node named b is still running")
	}
	require.Error(t, dup.err)
	require.True(t, dup.logHas(ErrNameTaken.Error(), b.cfg.ClientURL, b.cfg.PeerURL), "the refusal names the holder's URLs")
	require.True(t, dup.logHas("this node's own earlier run", "start it again then"), "the refusal says what to do when the holder is this node's earlier run")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, keys{prefix: DefaultPrefix}.volunteer("b"))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Contains(t, string(resp.Kvs[0].Value), b.cfg.PeerURL)
	waitVoters(t, cli, bound, "a", "b")
}

// TestLeftBootstrapNodeNoSecondCluster: the bootstrap node of a two-node
// cluster leaves gracefully (Ctrl-C in topoctl serve), which moves its
// data aside, and is run again with the same configuration (no seeds).
// It must not bootstrap a second cluster at its old URLs: Start fails
// with ErrFormerMember, naming the moved-aside data and what to do, and
// starts nothing.
func TestLeftBootstrapNodeNoSecondCluster(t *testing.T) {
	acfg := localConfig(t, "a")
	a := startCfg(t, acfg)
	bcfg := localConfig(t, "b")
	bcfg.Seeds = []string{acfg.ClientURL}
	b := startCfg(t, bcfg)
	ctx := context.Background()
	eventually(t, bound, "a and b are started voters", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		ml, err := b.Client().MemberList(cctx)
		if err != nil {
			return false, err.Error()
		}
		started := 0
		for _, m := range ml.Members {
			if m.Name != "" && !m.IsLearner {
				started++
			}
		}
		return started == 2, fmt.Sprint(ml.Members)
	})
	lctx, cancel := context.WithTimeout(ctx, DefaultLeaveTimeout)
	defer cancel()
	require.NoError(t, a.Leave(lctx))
	removed := removedData(acfg.DataDir)
	require.Len(t, removed, 1, "a's data was moved aside when it left")

	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	n, err := Start(sctx, acfg)
	if err == nil {
		n.Close()
	}
	require.ErrorIs(t, err, ErrFormerMember)
	require.ErrorContains(t, err, removed[0])
	require.ErrorContains(t, err, "give seeds")
	require.False(t, hasMemberData(acfg.DataDir), "a started a member again")

	// Given b's URL as a seed, it volunteers and joins b's cluster again.
	acfg.Seeds = []string{bcfg.ClientURL}
	startCfg(t, acfg)
	eventually(t, bound, "a is b's cluster's member again", func() (bool, string) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		ml, err := b.Client().MemberList(cctx)
		if err != nil {
			return false, err.Error()
		}
		for _, m := range ml.Members {
			if m.Name == "a" && !m.IsLearner {
				return true, ""
			}
		}
		return false, fmt.Sprint(ml.Members)
	})
}

// TestCopiedDataDirRefused: a node started with a copy of another
// node's data directory (a cloned disk, or the wrong --data-dir) would
// run as that node's member: with a one-member cluster, a second copy of
// the cluster (same cluster ID, so clients' guards cannot tell) that
// accepts writes the original never sees. Start refuses it with
// ErrForeignData, naming the member and what to do, before its server
// runs; also for data written before the data directory recorded its
// member (no record: the membership stored in the data is read). The
// original keeps its data and serves, also restarted from data without
// a record (an older layout). Restarted with other peer TLS settings, or
// with seeds of another cluster, it is refused with what to do.
func TestCopiedDataDirRefused(t *testing.T) {
	acfg := localConfig(t, "a")
	a := startCfg(t, acfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := a.Client().Put(ctx, "before", "1")
	require.NoError(t, err)
	a.Close()
	copyDir := filepath.Join(t.TempDir(), "copy")
	require.NoError(t, os.CopyFS(copyDir, os.DirFS(acfg.DataDir)))
	// a restarts from data without a record, as written by an older
	// topokit: its own membership passes.
	dropRecord(t, acfg.DataDir)
	a = startCfg(t, acfg)

	bcfg := localConfig(t, "b")
	bcfg.DataDir = copyDir
	var logs bytes.Buffer
	var mu sync.Mutex
	bcfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	for _, record := range []bool{true, false} {
		if !record {
			dropRecord(t, copyDir)
		}
		n, err := Start(ctx, bcfg)
		if err == nil {
			// Show what the copy does: it takes writes a never sees.
			_, perr := n.Client().Put(ctx, "copy-only", "x")
			n.Close()
			resp, _ := a.Client().Get(ctx, "copy-only")
			t.Fatalf("record %v: the copy of a's data started (its write: %v; a has it: %v)", record, perr, resp != nil && len(resp.Kvs) > 0)
		}
		require.ErrorIs(t, err, ErrForeignData, "record %v", record)
		require.ErrorContains(t, err, acfg.PeerURL)
		require.ErrorContains(t, err, "give this node its own data directory")
		mu.Lock()
		require.NotContains(t, logs.String(), "server started", "record %v: the copy's server ran", record)
		mu.Unlock()
		ln, lerr := net.Listen("tcp", strings.TrimPrefix(bcfg.ClientURL, "http://"))
		require.NoError(t, lerr, "record %v: the refused node still listens", record)
		ln.Close()
	}

	resp, err := a.Client().Get(ctx, "before")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	_, err = a.Client().Put(ctx, "after", "2")
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(acfg.DataDir, "member", memberRecordFile), "a's restart recorded its member")

	// a's own data, with other peer TLS settings (https instead of
	// http): refused with that said.
	tlsCfg := acfg
	tlsCfg.PeerURL = strings.Replace(acfg.PeerURL, "http://", "https://", 1)
	tlsCfg.AdvertisePeerURL = tlsCfg.PeerURL
	err = checkMemberRecord(tlsCfg)
	require.ErrorIs(t, err, ErrForeignData)
	require.ErrorContains(t, err, "same peer TLS settings")

	// a restarted with seeds of another cluster (seeds changed between
	// runs): refused, saying which cluster its data is of and what to
	// do; restarted with its own seeds it serves its data.
	c := startLocal(t, "c")
	a.Close()
	other := acfg
	other.Seeds = []string{c.cfg.ClientURL}
	n, err := Start(ctx, other)
	if err == nil {
		n.Close()
	}
	require.ErrorIs(t, err, etcd2topo.ErrClusterMismatch)
	require.ErrorContains(t, err, "give seeds of its own cluster")
	require.ErrorContains(t, err, filepath.Join(acfg.DataDir, "member")+" aside")
	a = startCfg(t, acfg)
	resp, err = a.Client().Get(ctx, "after")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
}

// dropRecord removes the member record from dataDir's member data, if
// any, as data written by an older topokit has none.
func dropRecord(t *testing.T, dataDir string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dataDir, "member", memberRecordFile)); !errors.Is(err, fs.ErrNotExist) {
		require.NoError(t, err)
	}
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestRestartOneByOneAfterOutage: every member of a two-voter cluster
// stops (a power cut), and the members are started again one at a time,
// as an operator or a service manager does. The first one cannot serve
// before a quorum runs: its Start waits for the others (saying so),
// instead of failing after the client's dial timeout -- which left no
// moment when a quorum ran -- and stopping it meanwhile (its ctx ending,
// Ctrl-C in serve) returns at once instead of hanging in etcd's Close of
// a server that never became ready. Once the second one starts both
// serve, with the data written before the outage.
func TestRestartOneByOneAfterOutage(t *testing.T) {
	acfg := localConfig(t, "a")
	a := startCfg(t, acfg)
	bcfg := localConfig(t, "b")
	bcfg.Seeds = []string{acfg.ClientURL}
	b := startCfg(t, bcfg)
	waitVoters(t, a.Client(), bound, "a", "b")
	ctx := context.Background()
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := a.Client().Put(pctx, "before", "1")
	pcancel()
	require.NoError(t, err)
	a.Close()
	b.Close()

	var logs bytes.Buffer
	var mu sync.Mutex
	saw := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), s)
	}
	acfg.Logger = slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	type started struct {
		n   *Node
		err error
	}
	startBg := func(ctx context.Context, cfg Config) chan started {
		c := make(chan started, 1)
		go func() {
			n, err := Start(ctx, cfg)
			c <- started{n, err}
		}()
		return c
	}
	waitsSaid := func() (bool, string) { return saw("waiting for a quorum"), "" }

	// a alone, stopped while it waits.
	sctx, scancel := context.WithCancel(ctx)
	ac := startBg(sctx, acfg)
	eventually(t, bound, "a says it waits for a quorum", func() (bool, string) {
		select {
		case r := <-ac:
			t.Fatalf("a's Start returned while no quorum runs: %v", r.err)
		default:
		}
		return waitsSaid()
	})
	scancel()
	select {
	case r := <-ac:
		require.ErrorIs(t, r.err, context.Canceled)
	case <-time.After(bound):
		t.Fatal("a's Start did not return once its ctx ended")
	}

	// a alone again, then b: both run.
	mu.Lock()
	logs.Reset()
	mu.Unlock()
	ac = startBg(ctx, acfg)
	eventually(t, bound, "a says it waits for a quorum", func() (bool, string) { return waitsSaid() })
	bc := startBg(ctx, bcfg)
	for _, c := range []chan started{ac, bc} {
		select {
		case r := <-c:
			require.NoError(t, r.err)
			t.Cleanup(r.n.Close)
			if r.n.cfg.Name == "a" {
				a = r.n
			}
		case <-time.After(bound):
			t.Fatal("a restarted member did not start once a quorum ran")
		}
	}
	gctx, gcancel := context.WithTimeout(ctx, 10*time.Second)
	defer gcancel()
	resp, err := a.Client().Get(gctx, "before")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
}
