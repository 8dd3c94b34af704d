package topo

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Factory opens connections for one backend implementation.
type Factory interface {
	// Create opens a Conn to the store at serverAddress (backend-specific,
	// e.g. "host:port,host:port"), rooted at root, for the named cell.
	// It returns an error when the address or root is malformed; backends
	// that dial lazily report an unreachable store on the first call.
	Create(cell, serverAddress, root string) (Conn, error)
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
// already registered. It is safe for concurrent use; bundled backends call
// it from init.
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
