package middleware

import "sync"

// pathSet is a set of keys safe for concurrent use.
type pathSet struct {
	mu sync.Mutex
	m  map[string]struct{}
}

func newPathSet() *pathSet { return &pathSet{m: map[string]struct{}{}} }

func (s *pathSet) add(k string) {
	s.mu.Lock()
	s.m[k] = struct{}{}
	s.mu.Unlock()
}

// take removes k and reports whether it was there.
func (s *pathSet) take(k string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[k]
	delete(s.m, k)
	return ok
}
