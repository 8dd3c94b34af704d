package etcd2topo

import (
	"context"
	"fmt"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// listDirEntries is the size of the directory BenchmarkListDir lists.
const listDirEntries = 1000

// BenchmarkListDir lists a directory of 1,000 files (names only) beside
// the raw client's keys-only range read of the same keys.
func BenchmarkListDir(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	for i := range listDirEntries {
		_, err := cli.Put(ctx, fmt.Sprintf("%s/d/f%04d", root, i), "v")
		must(b, err)
	}
	prefix := root + "/d/"
	pair(b, e, func() error {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err == nil && len(resp.Kvs) != listDirEntries {
			err = fmt.Errorf("raw: %d keys", len(resp.Kvs))
		}
		return err
	}, func() error {
		entries, err := c.ListDir(ctx, "d", false)
		if err == nil && len(entries) != listDirEntries {
			err = fmt.Errorf("ListDir: %d entries", len(entries))
		}
		return err
	})
}

// BenchmarkList lists 1,000 files (keys and values) under a prefix beside
// the raw client's range read of the same keys.
func BenchmarkList(b *testing.B) {
	e := newBenchEnv(b)
	c, cli, root := e.c, e.cli, e.root
	ctx := context.Background()
	for i := range listDirEntries {
		_, err := cli.Put(ctx, fmt.Sprintf("%s/d/f%04d", root, i), "some value")
		must(b, err)
	}
	prefix := root + "/d/"
	pair(b, e, func() error {
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err == nil && len(resp.Kvs) != listDirEntries {
			err = fmt.Errorf("raw: %d keys", len(resp.Kvs))
		}
		return err
	}, func() error {
		kvs, err := c.List(ctx, "d/")
		if err == nil && len(kvs) != listDirEntries {
			err = fmt.Errorf("List: %d files", len(kvs))
		}
		return err
	})
}
