package topo_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/consultopo"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/etcd2topo"
	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
	"github.com/topokit/topokit/topo/zk2topo"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// realAliasStore is one real backend for testCellsAliasesReal.
type realAliasStore struct {
	impl    string
	addr    string
	factory topo.Factory // a configured factory, given with WithFactory
	root    func(name string) string
}

// testCellsAliasesReal runs cells aliases, the idempotent CreateCellInfo and
// a Server opened with WithFactory against a real store: the rules, the
// Vitess record at its path, and writers on two Servers (two clients)
// racing to put one cell into two aliases.
func testCellsAliasesReal(t *testing.T, s realAliasStore) {
	ctx := t.Context()
	open := func() *topo.Server {
		ts, err := topo.OpenServerContext(ctx, s.impl, s.addr, s.root("global"), topo.WithFactory(s.factory))
		require.NoError(t, err)
		t.Cleanup(ts.Close)
		return ts
	}
	ts, other := open(), open()

	ci := &topodatapb.CellInfo{ServerAddress: s.addr, Root: s.root("zone1")}
	require.NoError(t, ts.CreateCellInfo(ctx, "zone1", ci))
	require.NoError(t, other.CreateCellInfo(ctx, "zone1", proto.Clone(ci).(*topodatapb.CellInfo)), "an identical CreateCellInfo is idempotent")
	requireCodeT(t, ts.CreateCellInfo(ctx, "zone1", &topodatapb.CellInfo{ServerAddress: s.addr, Root: s.root("elsewhere")}), topo.NodeExists)
	zone1, err := ts.ConnForCell(ctx, "zone1")
	require.NoError(t, err, "a cell opened with the configured factory")
	_, err = zone1.Create(ctx, "d/f", []byte("x"))
	require.NoError(t, err)

	require.NoError(t, ts.CreateCellsAlias(ctx, "east", aliasOf("zone1", "zone2")))
	data, _, err := ts.GlobalCell().Get(ctx, "cells_aliases/east/CellsAlias")
	require.NoError(t, err)
	want, err := proto.Marshal(aliasOf("zone1", "zone2"))
	require.NoError(t, err)
	require.Equal(t, want, data)
	got, err := other.GetAliasForCell(ctx, "zone2")
	require.NoError(t, err)
	require.Equal(t, "east", got)
	requireConflict(t, other.CreateCellsAlias(ctx, "west", aliasOf("zone2")))
	requireConflict(t, other.CreateCellsAlias(ctx, "zone1", aliasOf("zone7")))
	requireConflict(t, other.CreateCellInfo(ctx, "east", &topodatapb.CellInfo{Root: s.root("east")}))
	require.NoError(t, other.UpdateCellsAlias(ctx, "east", func(ca *topodatapb.CellsAlias) error {
		ca.Cells = append(ca.Cells, "zone3")
		return nil
	}))
	all, err := ts.GetCellsAliases(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, []string{"zone1", "zone2", "zone3"}, all["east"].GetCells())
	require.NoError(t, ts.DeleteCellsAlias(ctx, "east"))
	_, err = other.GetAliasForCell(ctx, "zone1")
	requireCodeT(t, err, topo.NoNode)

	for round := range 5 {
		var wg sync.WaitGroup
		servers := []*topo.Server{ts, other}
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() {
				errs[i] = servers[i%2].CreateCellsAlias(ctx, fmt.Sprintf("r%d-%d", round, i), aliasOf(fmt.Sprintf("shared%d", round)))
			})
		}
		wg.Wait()
		all, err := ts.GetCellsAliases(ctx)
		require.NoError(t, err)
		var holders, succeeded []string
		for name, ca := range all {
			if slices.Contains(ca.GetCells(), fmt.Sprintf("shared%d", round)) {
				holders = append(holders, name)
			}
		}
		for i, err := range errs {
			if err == nil {
				succeeded = append(succeeded, fmt.Sprintf("r%d-%d", round, i))
			} else {
				requireConflict(t, err)
			}
		}
		slices.Sort(holders)
		require.LessOrEqualf(t, len(holders), 1, "round %d: %v", round, holders)
		require.Equalf(t, succeeded, holders, "round %d", round)
	}
}

func TestCellsAliasesEtcd(t *testing.T) {
	testCellsAliasesReal(t, realAliasStore{
		impl: etcd2topo.FactoryName, addr: etcdtest.Start(t), factory: etcd2topo.Factory{},
		root: func(name string) string { return "/srv/" + name },
	})
}

func TestCellsAliasesZooKeeper(t *testing.T) {
	testCellsAliasesReal(t, realAliasStore{
		impl: zk2topo.FactoryName, addr: zktest.Start(t),
		factory: zk2topo.Factory{Options: zk2topo.Options{SessionTimeout: 10 * time.Second}},
		root:    func(name string) string { return "/srv/" + name },
	})
}

func TestCellsAliasesConsul(t *testing.T) {
	testCellsAliasesReal(t, realAliasStore{
		impl: consultopo.FactoryName, addr: consultest.Start(t),
		factory: consultopo.NewFactory(consultopo.Options{SessionTTL: 20 * time.Second}),
		root:    func(name string) string { return "srv/" + name },
	})
}
