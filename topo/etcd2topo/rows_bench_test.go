package etcd2topo

import (
	"context"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// BenchmarkTryLockUnlock: an uncontended TryLock+Unlock, beside a
// concurrency.Mutex TryLock+Unlock on a long-lived session.
func BenchmarkTryLockUnlock(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	must(b, err)
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(30))
	must(b, err)
	defer sess.Close()
	m := concurrency.NewMutex(sess, root+"/rawlock/")
	// Warm up: the Conn grants its lease on first use.
	ld, err := c.TryLock(ctx, "d", "x")
	must(b, err)
	must(b, ld.Unlock(ctx))
	pair(b, e, func() error {
		if err := m.TryLock(ctx); err != nil {
			return err
		}
		return m.Unlock(ctx)
	}, func() error {
		ld, err := c.TryLock(ctx, "d", "x")
		if err != nil {
			return err
		}
		return ld.Unlock(ctx)
	})
}

// BenchmarkLockWithTTLUnlock: an uncontended LockWithTTL (a TTL other
// than the Conn's, so the lock gets a lease of its own) + Unlock, beside
// the least the raw client needs for the same: grant a lease, put the
// entry on it if absent, revoke the lease (which deletes the entry).
func BenchmarkLockWithTTLUnlock(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	_, err := c.Create(ctx, "d/f", []byte("x"))
	must(b, err)
	pair(b, e, func() error {
		g, err := cli.Grant(ctx, 20)
		if err != nil {
			return err
		}
		key := fmt.Sprintf("%s/rawlock/%d", root, g.ID)
		tr, err := cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, "x", clientv3.WithLease(g.ID))).Commit()
		if err == nil && !tr.Succeeded {
			err = fmt.Errorf("raw lock entry exists")
		}
		if err != nil {
			return err
		}
		_, err = cli.Revoke(ctx, g.ID)
		return err
	}, func() error {
		ld, err := c.LockWithTTL(ctx, "d", "x", 20*time.Second)
		if err != nil {
			return err
		}
		return ld.Unlock(ctx)
	})
}
