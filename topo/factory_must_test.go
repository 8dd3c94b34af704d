package topo_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestMustRegisterFactory: a first registration succeeds; a duplicate name,
// an empty name and a nil factory panic with an error that names the
// factory and why, and the first registration stays.
func TestMustRegisterFactory(t *testing.T) {
	name := uniqueFactoryName(t)
	first := topo.FactoryFunc(func(cell, addr, root string) (topo.Conn, error) {
		return memorytopo.NewFactory().Create(cell, addr, root)
	})
	require.NotPanics(t, func() { topo.MustRegisterFactory(name, first) })
	require.Contains(t, topo.Factories(), name)

	panicErr := func(f func()) (err error) {
		defer func() {
			r := recover()
			require.NotNil(t, r, "MustRegisterFactory did not panic")
			e, ok := r.(error)
			require.Truef(t, ok, "the panic value is a %T, not an error", r)
			err = e
		}()
		f()
		return nil
	}
	err := panicErr(func() {
		topo.MustRegisterFactory(name, topo.FactoryFunc(func(string, string, string) (topo.Conn, error) {
			return nil, errors.New("the second factory must not be used")
		}))
	})
	require.ErrorContains(t, err, `a factory named "`+name+`" is already registered`)
	require.ErrorContains(t, err, "registered factories: ")
	require.ErrorContains(t, err, memorytopo.Name, "the message lists what is registered")

	got, err := topo.GetFactory(name)
	require.NoError(t, err)
	conn, err := got.Create("cell", "addr", "/root")
	require.NoError(t, err, "the first registration stays")
	conn.Close()

	require.ErrorContains(t, panicErr(func() { topo.MustRegisterFactory("", first) }), "needs a name")
	require.ErrorContains(t, panicErr(func() { topo.MustRegisterFactory(uniqueFactoryName(t), nil) }), "non-nil factory")
}

// TestBundledBackendsRegistered: importing a bundled backend registers its
// factory (its init calls MustRegisterFactory, which would have panicked
// on a failure).
func TestBundledBackendsRegistered(t *testing.T) {
	require.Contains(t, topo.Factories(), memorytopo.Name)
}
