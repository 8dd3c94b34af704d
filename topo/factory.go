package topo

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Factory opens connections for one backend implementation.
//
// A Factory value carries the backend's options (TLS, credentials, TTLs,
// timeouts): the Server opens the global cell and every cell named by a
// CellInfo record with the one Factory it was given (NewServer's argument,
// or WithFactory for OpenServer and OpenServerContext), passing only the
// record's address and root. A configured backend Factory thus reaches
// every cell without a hand-written FactoryFunc; see docs/embedding.md for
// each backend's Factory and its options.
type Factory interface {
	// Create opens a Conn to the store at serverAddress (backend-specific,
	// e.g. "host:port,host:port"), rooted at root, for the named cell.
	// It returns an error when the address or root is malformed; backends
	// that dial lazily report an unreachable store on the first call.
	// Create takes no context: OpenServerContext and Server.ConnForCell
	// stop waiting for it when their context ends (and close the Conn it
	// returns later without an error; with an error, the Conn is ignored,
	// so a nil pointer of the backend's Conn type is harmless there), but
	// only the backend can stop the dial itself, by
	// implementing ContextFactory, and only the backend's constructor can
	// fail fast on an address where nothing answers.
	Create(cell, serverAddress, root string) (Conn, error)
}

// ContextFactory is a Factory whose dial honours a context. When the
// Server's Factory implements it, OpenServerContext and Server.ConnForCell
// call CreateContext with their context instead of Create, so that a
// deadline or cancellation also ends the dial (which must then return
// Timeout or Interrupted, as backendkit.FromContext does). A backend that probes its
// store while dialling (to fail fast with Unavailable naming an address
// where nothing answers) does so here.
type ContextFactory interface {
	Factory
	// CreateContext is Create bounded by ctx.
	CreateContext(ctx context.Context, cell, serverAddress, root string) (Conn, error)
}

// createConn opens a Conn with f, waiting for it until ctx ends: then it
// returns ctx's Timeout or Interrupted (naming serverAddress), and the Conn
// the abandoned dial returns later is closed. A ContextFactory gets ctx.
func createConn(ctx context.Context, f Factory, cell, serverAddress, root string) (Conn, error) {
	if err := checkContext(ctx, serverAddress); err != nil {
		return nil, err
	}
	create := func() (Conn, error) {
		if cf, ok := f.(ContextFactory); ok {
			return cf.CreateContext(ctx, cell, serverAddress, root)
		}
		return f.Create(cell, serverAddress, root)
	}
	if ctx.Done() == nil {
		return create()
	}
	type result struct {
		conn Conn
		err  error
	}
	done := make(chan result) // unbuffered: a result nobody takes is closed
	abandoned := make(chan struct{})
	go func() {
		conn, err := create()
		select {
		case done <- result{conn, err}:
		case <-abandoned:
			closeDialled(conn, err)
		}
	}()
	select {
	case r := <-done:
		return r.conn, r.err
	case <-ctx.Done():
		close(abandoned)
		// A dial that finished at the same moment is closed by the
		// goroutine or here, never leaked.
		select {
		case r := <-done:
			closeDialled(r.conn, r.err)
		default:
		}
		return nil, fromContext(ctx, serverAddress)
	}
}

// closeDialled closes the Conn of an abandoned dial that succeeded. A
// failed dial's Conn is not one: a factory may return a nil pointer of its
// own Conn type with its error (a non-nil Conn holding nil), whose Close
// would panic, in a goroutine of the caller's process.
func closeDialled(conn Conn, err error) {
	if err == nil && conn != nil {
		conn.Close()
	}
}

// FactoryFunc adapts a function to the Factory interface.
type FactoryFunc func(cell, serverAddress, root string) (Conn, error)

// Create calls f.
func (f FactoryFunc) Create(cell, serverAddress, root string) (Conn, error) {
	return f(cell, serverAddress, root)
}

// registry is the one piece of package-level mutable state: the factories
// registered by backends' init functions.
var registry = struct {
	sync.RWMutex
	m map[string]Factory
}{m: map[string]Factory{}}

// RegisterFactory makes a backend available to OpenServer under name. It
// returns an error (never exits) when name is empty, f is nil, or name is
// already registered; the first registration of a name stays. It is for
// programmatic use (a program that registers factories at run time and
// handles the error); a backend's init calls MustRegisterFactory instead.
// It is safe for concurrent use.
func RegisterFactory(name string, f Factory) error {
	if name == "" || f == nil {
		return errors.New("topo: RegisterFactory needs a name and a non-nil factory")
	}
	registry.Lock()
	defer registry.Unlock()
	if _, ok := registry.m[name]; ok {
		return fmt.Errorf("topo: a factory named %q is already registered", name)
	}
	registry.m[name] = f
	return nil
}

// MustRegisterFactory is RegisterFactory for a backend's init function: it
// panics, with an error naming the factory, saying why and listing the
// registered factories, when
// RegisterFactory fails (name empty, f nil, or name already registered, e.g.
// by two backends that chose the same name, or by a program that registered
// the name itself before the backend's package was initialised). A failed
// registration in init is a build mistake that no caller could handle: a
// program that went on would open the wrong backend, or none, under that
// name. Every bundled backend and examples/templatetopo call it from init:
//
//	func init() { topo.MustRegisterFactory(FactoryName, Factory{}) }
//
// It is safe for concurrent use.
func MustRegisterFactory(name string, f Factory) {
	if err := RegisterFactory(name, f); err != nil {
		panic(fmt.Errorf("%w (in topo.MustRegisterFactory(%q); registered factories: %s)",
			err, name, strings.Join(Factories(), ", ")))
	}
}

// Factories returns the names of the registered factories, sorted.
func Factories() []string {
	registry.RLock()
	defer registry.RUnlock()
	names := make([]string, 0, len(registry.m))
	for n := range registry.m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// GetFactory returns the factory registered under name. It returns a
// NoImplementation *Error naming the registered factories when there is
// none.
func GetFactory(name string) (Factory, error) {
	registry.RLock()
	f, ok := registry.m[name]
	registry.RUnlock()
	if !ok {
		names := Factories()
		if len(names) == 0 {
			names = []string{"none"}
		}
		return nil, &Error{Code: NoImplementation, Path: name,
			Err: fmt.Errorf("no topology implementation of that name is registered; registered implementations: %s", strings.Join(names, ", "))}
	}
	return f, nil
}
