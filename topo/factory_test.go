package topo_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

var factorySeq atomic.Int64

// uniqueFactoryName returns a name no other test (or -count run) registered.
func uniqueFactoryName(t *testing.T) string {
	return fmt.Sprintf("test-factory-%d-%s", factorySeq.Add(1), t.Name())
}

func TestRegisterFactory(t *testing.T) {
	name := uniqueFactoryName(t)
	var calls []string
	f := topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
		calls = append(calls, cell+"|"+addr+"|"+root)
		return memorytopo.NewFactory().Create(cell, addr, root)
	})
	require.NoError(t, topo.RegisterFactory(name, f))
	require.Contains(t, topo.Factories(), name)
	require.True(t, slices.IsSorted(topo.Factories()), "Factories is sorted")

	got, err := topo.GetFactory(name)
	require.NoError(t, err)
	conn, err := got.Create("cell1", "addr", "/root")
	require.NoError(t, err)
	conn.Close()
	require.Equal(t, []string{"cell1|addr|/root"}, calls)

	// A duplicate is an error, and the first registration stays.
	err = topo.RegisterFactory(name, topo.FactoryFunc(func(string, string, string) (topo.Conn, error) {
		return nil, errors.New("the second factory must not be used")
	}))
	require.Error(t, err)
	require.Contains(t, err.Error(), name)
	got, err = topo.GetFactory(name)
	require.NoError(t, err)
	conn, err = got.Create("cell2", "addr", "/root")
	require.NoError(t, err)
	conn.Close()
	require.Len(t, calls, 2)

	require.Error(t, topo.RegisterFactory("", f), "an empty name is refused")
	require.Error(t, topo.RegisterFactory(uniqueFactoryName(t), nil), "a nil factory is refused")
}

func TestRegisterFactoryConcurrent(t *testing.T) {
	name := uniqueFactoryName(t)
	f := topo.FactoryFunc(func(string, string, string) (topo.Conn, error) { return nil, errors.New("unused") })
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if topo.RegisterFactory(name, f) == nil {
				wins.Add(1)
			}
			_, _ = topo.GetFactory(name)
			_ = topo.Factories()
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, wins.Load(), "exactly one of several concurrent registrations of a name succeeds")
}

func TestBundledMemoryFactoryRegistered(t *testing.T) {
	require.Contains(t, topo.Factories(), "memory")
	f, err := topo.GetFactory("memory")
	require.NoError(t, err)
	require.NotNil(t, f)
}

func TestGetFactoryUnknown(t *testing.T) {
	_, err := topo.GetFactory("no-such-backend")
	require.True(t, topo.IsErrType(err, topo.NoImplementation), "got %v", err)
	require.Contains(t, err.Error(), "no-such-backend")
	for _, name := range topo.Factories() {
		require.Contains(t, err.Error(), name, "the error names the registered implementations")
	}

	ts, err := topo.OpenServer("no-such-backend", "addr", "/root")
	require.Nil(t, ts)
	require.True(t, topo.IsErrType(err, topo.NoImplementation), "got %v", err)
	require.Contains(t, err.Error(), "memory")
}

func TestOpenServer(t *testing.T) {
	name := uniqueFactoryName(t)
	mem := memorytopo.NewFactory()
	var cells []string
	require.NoError(t, topo.RegisterFactory(name, topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
		cells = append(cells, cell)
		if addr == "fail" {
			return nil, topo.NewError(topo.Unavailable, addr)
		}
		return mem.Create(cell, addr, root)
	})))

	ts, err := topo.OpenServer(name, "mem", "/global")
	require.NoError(t, err)
	defer ts.Close()
	require.Equal(t, []string{topo.GlobalCell}, cells, "OpenServer opens the global cell")
	ctx := t.Context()
	_, err = ts.GlobalCell().Create(ctx, "x", []byte("y"))
	require.NoError(t, err)
	// The global connection is rooted at /global in the store "mem".
	raw, err := mem.Create("raw", "mem", "/")
	require.NoError(t, err)
	defer raw.Close()
	data, _, err := raw.Get(ctx, "global/x")
	require.NoError(t, err)
	require.Equal(t, "y", string(data))

	_, err = topo.OpenServer(name, "fail", "/global")
	require.True(t, topo.IsErrType(err, topo.Unavailable), "the factory's error is returned: %v", err)

	// The bundled memory backend by name.
	ts2, err := topo.OpenServer("memory", uniqueFactoryName(t), "/g") // a fresh store per run
	require.NoError(t, err)
	defer ts2.Close()
	_, err = ts2.GlobalCell().Create(ctx, "f", nil)
	require.NoError(t, err)
}
