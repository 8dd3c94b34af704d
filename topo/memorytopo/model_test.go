package memorytopo_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestAgainstModel runs random file operations through two Conns on one
// store (one rooted at the top, one at "r") and checks every result against
// a plain map, including ListDir's implicit directories, List's prefixes,
// GetVersion's history, the per-root read indexes, and transactions (the
// first failing op and its code, or every write as its method would do).
func TestAgainstModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) { runModel(t, seed) })
	}
}

func runModel(t *testing.T, seed uint64) {
	ctx := testCtx(t)
	const history = 3
	f := memorytopo.NewFactoryWithOptions(memorytopo.Options{History: history})
	top, err := f.NewConn("m", "")
	require.NoError(t, err)
	defer top.Close()
	sub, err := f.NewConn("m", "r")
	require.NoError(t, err)
	defer sub.Close()

	type file struct {
		value    string
		versions []int64 // oldest first, current last
		values   []string
	}
	model := map[string]*file{} // top-level paths
	segs := []string{"a", "b", "ab"}
	rng := rand.New(rand.NewPCG(seed, 2))
	randPath := func() string {
		n := 1 + rng.IntN(3)
		parts := []string{}
		if rng.IntN(2) == 0 {
			parts = append(parts, "r")
		}
		for range n {
			parts = append(parts, segs[rng.IntN(len(segs))])
		}
		return strings.Join(parts, "/")
	}
	// via picks the Conn to use for top-level path p and the path to give it.
	via := func(p string) (topo.Conn, string) {
		if rest, ok := strings.CutPrefix(p, "r/"); ok && rng.IntN(2) == 0 {
			return sub, rest
		}
		return top, p
	}

	for i := range 3000 {
		p := randPath()
		c, cp := via(p)
		m := model[p]
		switch op := rng.IntN(8); op {
		case 0: // Create
			v, err := c.Create(ctx, cp, []byte(fmt.Sprint(i)))
			if m != nil {
				requireCode(t, err, topo.NodeExists)
				continue
			}
			require.NoError(t, err)
			model[p] = &file{value: fmt.Sprint(i), versions: []int64{int64(v.(topo.NumericVersion))}, values: []string{fmt.Sprint(i)}}
		case 1: // Update, conditional or not
			var want topo.Version
			if m != nil && rng.IntN(2) == 0 {
				want = topo.NumericVersion(m.versions[len(m.versions)-1] - int64(rng.IntN(2)))
			}
			v, err := c.Update(ctx, cp, []byte(fmt.Sprint(i)), want)
			switch {
			case m != nil && want != nil && int64(want.(topo.NumericVersion)) != m.versions[len(m.versions)-1]:
				requireCode(t, err, topo.BadVersion)
				continue
			case m == nil:
				require.NoError(t, err)
				m = &file{}
				model[p] = m
			default:
				require.NoError(t, err)
			}
			m.value = fmt.Sprint(i)
			m.versions = append(m.versions, int64(v.(topo.NumericVersion)))
			m.values = append(m.values, m.value)
		case 2: // Delete
			err := c.Delete(ctx, cp, nil)
			if m == nil {
				requireCode(t, err, topo.NoNode)
				continue
			}
			require.NoError(t, err)
			delete(model, p)
		case 3: // Get
			got, v, err := c.Get(ctx, cp)
			if m == nil {
				requireCode(t, err, topo.NoNode)
				continue
			}
			require.NoError(t, err)
			require.Equal(t, m.value, string(got))
			require.Equal(t, topo.NumericVersion(m.versions[len(m.versions)-1]), v)
		case 4: // GetVersion
			if m == nil {
				continue
			}
			k := rng.IntN(len(m.versions))
			got, err := c.GetVersion(ctx, cp, m.versions[k])
			if k < len(m.versions)-history {
				requireCode(t, err, topo.Compacted)
				continue
			}
			require.NoError(t, err)
			require.Equal(t, m.values[k], string(got))
		case 5: // List
			prefix := p[:rng.IntN(len(p)+1)]
			lc, lp := via(prefix)
			if lc == sub {
				lp = strings.TrimPrefix(prefix, "r/")
			}
			kvs, err := lc.List(ctx, lp)
			var want []string
			for q := range model {
				if lc == top && strings.HasPrefix(q, prefix) || lc == sub && strings.HasPrefix(q, "r/"+lp) {
					want = append(want, strings.TrimPrefix(q, map[bool]string{true: "r/"}[lc == sub]))
				}
			}
			sort.Strings(want)
			if len(want) == 0 {
				requireCode(t, err, topo.NoNode)
				continue
			}
			require.NoError(t, err)
			var got []string
			for _, kv := range kvs {
				got = append(got, kv.Path)
			}
			require.Equal(t, want, got, "List(%q) via %v", lp, lc == sub)
		case 6: // ListDir of p's parent
			dir := p[:max(strings.LastIndexByte(p, '/'), 0)]
			entries, err := top.ListDir(ctx, dir, true)
			want := map[string]topo.DirEntryType{}
			for q := range model {
				rest, ok := q, true
				if dir != "" {
					rest, ok = strings.CutPrefix(q, dir+"/")
				}
				if !ok {
					continue
				}
				name, _, isDir := strings.Cut(rest, "/")
				if _, seen := want[name]; isDir || !seen {
					want[name] = map[bool]topo.DirEntryType{true: topo.TypeDirectory, false: topo.TypeFile}[isDir]
				}
			}
			if len(want) == 0 {
				requireCode(t, err, topo.NoNode)
				continue
			}
			require.NoError(t, err)
			var names []string
			for n := range want {
				names = append(names, n)
			}
			slices.Sort(names)
			require.Len(t, entries, len(names), "ListDir(%q)", dir)
			for j, e := range entries {
				require.Equal(t, names[j], e.Name)
				require.Equal(t, want[e.Name], e.Type, "ListDir(%q) %s", dir, e.Name)
				require.False(t, e.Ephemeral)
			}
		case 7: // Txn of conditions and writes on distinct paths, via top
			ops, failAt, failCode := []topo.TxnOp{}, -1, topo.ErrorCode(0)
			fail := func(code topo.ErrorCode) {
				if failAt < 0 {
					failAt, failCode = len(ops), code
				}
			}
			used := map[string]bool{}
			for range 1 + rng.IntN(4) {
				q := randPath()
				if used[q] {
					continue
				}
				used[q] = true
				mq := model[q]
				var cur int64 = -1
				if mq != nil {
					cur = mq.versions[len(mq.versions)-1]
				}
				ver := func() topo.Version { // current, stale or nil
					switch rng.IntN(3) {
					case 0:
						return nil
					case 1:
						return topo.NumericVersion(max(cur, 1))
					}
					return topo.NumericVersion(max(cur, 1) + 1)
				}
				switch rng.IntN(6) {
				case 0:
					v := topo.NumericVersion(max(cur, 1) - int64(rng.IntN(2)))
					if mq == nil {
						fail(topo.NoNode)
					} else if int64(v) != cur {
						fail(topo.BadVersion)
					}
					ops = append(ops, topo.IfVersion(q, v))
				case 1:
					if mq != nil {
						fail(topo.NodeExists)
					}
					ops = append(ops, topo.IfAbsent(q))
				case 2:
					if mq == nil {
						fail(topo.NoNode)
					}
					ops = append(ops, topo.IfPresent(q))
				case 3:
					if mq != nil {
						fail(topo.NodeExists)
					}
					ops = append(ops, topo.CreateOp(q, []byte(fmt.Sprint(i, q))))
				case 4:
					v := ver()
					if v != nil && mq == nil {
						fail(topo.NoNode)
					} else if v != nil && int64(v.(topo.NumericVersion)) != cur {
						fail(topo.BadVersion)
					}
					ops = append(ops, topo.UpdateOp(q, []byte(fmt.Sprint(i, q)), v))
				case 5:
					v := ver()
					if mq == nil {
						fail(topo.NoNode)
					} else if v != nil && int64(v.(topo.NumericVersion)) != cur {
						fail(topo.BadVersion)
					}
					ops = append(ops, topo.DeleteOp(q, v))
				}
			}
			vs, err := top.Txn(ctx, ops...)
			if failAt >= 0 {
				requireTxnErr(t, err, failAt, ops[failAt].Kind, failCode)
				continue
			}
			require.NoError(t, err)
			for j, op := range ops {
				switch op.Kind {
				case topo.TxnCreate, topo.TxnUpdate:
					mq := model[op.Path]
					if mq == nil {
						mq = &file{}
						model[op.Path] = mq
					}
					mq.value = string(op.Contents)
					mq.versions = append(mq.versions, int64(vs[j].(topo.NumericVersion)))
					mq.values = append(mq.values, mq.value)
				case topo.TxnDelete:
					delete(model, op.Path)
				default:
					require.Nil(t, vs[j])
				}
			}
		}
	}
}
