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
// GetVersion's history and the per-root read indexes.
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
		switch op := rng.IntN(7); op {
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
		}
	}
}
