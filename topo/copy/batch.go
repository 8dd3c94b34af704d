package copy

import (
	"slices"
	"strings"
	"sync"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/tree"
)

// batchBytes bounds the values of one batch, in bytes; a larger value is
// written alone. Each backend takes more in one transaction (etcd 128
// writes and 1.5 MiB, Consul 64 operations and 512 KiB with values in
// base64, ZooKeeper 1 MiB); a batch that is still refused is written one
// file at a time.
const batchBytes = 128 << 10

// batches splits ops into batches of at most n writes and batchBytes of
// values, in order; n < 2 gives one write per batch.
func batches(ops []Op, n int) [][]Op {
	var out [][]Op
	var cur []Op
	size := 0
	for _, w := range ops {
		if n < 2 || len(w.Value) > batchBytes {
			out = append(out, []Op{w})
			continue
		}
		if len(cur) == n || size+len(w.Value) > batchBytes {
			out = append(out, cur)
			cur, size = nil, 0
		}
		cur = append(cur, w)
		size += len(w.Value)
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// txnOps are the transaction ops of the writes b, with the same
// conditions as writeOne's calls: a create fails if the file exists, an
// overwrite and a delete need the version planned.
func txnOps(b []Op) []topo.TxnOp {
	ops := make([]topo.TxnOp, len(b))
	for i, w := range b {
		switch w.Kind {
		case Create:
			ops[i] = topo.CreateOp(w.Path, w.Value)
		case Overwrite:
			ops[i] = topo.UpdateOp(w.Path, w.Value, w.Old.Version)
		case Delete:
			ops[i] = topo.DeleteOp(w.Path, w.Old.Version)
		}
	}
	return ops
}

// absentDirs returns, for each batch bs[i], the directories at or under
// the plan's dir above the files it creates that held no file when the
// destination was listed and that no earlier batch creates a file under:
// the store is told that they are absent (zk2topo.DirectoriesAbsent), so
// that ZooKeeper's multi creates them with the files instead of failing
// for want of them first. It is only a hint: a directory that exists
// after all costs the store a failed multi and a round of reads, never a
// wrong write.
func (p *Plan) absentDirs(bs [][]Op) [][]string {
	out := make([][]string, len(bs))
	claimed := map[string]bool{}
	for _, b := range bs {
		for _, w := range b {
			claimed[w.Path] = true // a file is written there: not absent
		}
	}
	for i, b := range bs {
		for _, w := range b {
			if w.Kind != Create {
				continue
			}
			for _, d := range tree.AncestorDirs(w.Path) {
				if !tree.Under(d, p.dir) || p.held[d] {
					break
				}
				if !claimed[d] {
					claimed[d] = true
					out[i] = append(out[i], d)
				}
			}
		}
	}
	return out
}

// forEach runs fn on items with at most parallel calls in flight, in
// order of issue, and stops issuing new calls once stop returns true. It
// returns when every issued call has returned.
func forEach[T any](items []T, parallel int, stop func() bool, fn func(i int, it T)) {
	if parallel < 1 {
		parallel = 1
	}
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, it := range items {
		sem <- struct{}{}
		if stop() {
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i, it)
		}()
	}
	wg.Wait()
}

// phases groups the indexes 0..n-1 of items into phases to run one after
// the other, so that a file is deleted only once every file below it that
// is deleted too is gone: phase 0 holds the items that delete nothing
// (isDelete false) and the deletes with no deleted file below them, phase
// k the deletes whose deleted descendants are all in earlier phases. A
// tree without a file that has files below it is one phase. On ZooKeeper
// a file with files below it is a znode with children: its delete only
// empties its data, and a concurrent delete of its last child could then
// leave it behind as an empty znode, which reads as an empty file. Each
// phase keeps the order of items.
func phases(n int, path func(i int) string, isDelete func(i int) bool) [][]int {
	height := map[string]int{}
	var dels []int
	for i := range n {
		if isDelete(i) {
			dels = append(dels, i)
		}
	}
	// Deepest first: a path's height is final before its ancestors'.
	byDepth := slices.Clone(dels)
	slices.SortStableFunc(byDepth, func(a, b int) int {
		return strings.Count(path(b), "/") - strings.Count(path(a), "/")
	})
	for _, i := range byDepth {
		h := height[path(i)]
		for _, d := range tree.AncestorDirs(path(i)) {
			height[d] = max(height[d], h+1)
		}
	}
	var out [][]int
	for i := range n {
		h := 0
		if isDelete(i) {
			h = height[path(i)]
		}
		for len(out) <= h {
			out = append(out, nil)
		}
		out[h] = append(out[h], i)
	}
	return out
}
