package tree

import (
	"errors"
	"strings"

	"github.com/topokit/topokit/topo"
)

// Under reports whether the canonical path p is dir or below it ("" is the
// root, above everything).
func Under(p, dir string) bool {
	return dir == "" || p == dir || strings.HasPrefix(p, dir+"/")
}

// CanonicalFile reports whether p, a path a backend listed, is a canonical
// file path: one that topokit writes as it is (no empty, "." or ".."
// segment, no trailing "/").
func CanonicalFile(p string) bool {
	c, err := topo.CleanFilePath(p)
	return err == nil && c == p
}

// AncestorDirs returns the directories above the canonical path p, parent
// first, without the root ("").
func AncestorDirs(p string) []string {
	var out []string
	for i := strings.LastIndexByte(p, '/'); i > 0; i = strings.LastIndexByte(p, '/') {
		p = p[:i]
		out = append(out, p)
	}
	return out
}

// WithPath fills in the path of a *topo.Error that names none (backends
// leave it empty for the root) with the canonical path p shown as users
// type it, with a leading "/", so that every error names a path. Other
// errors are returned unchanged.
func WithPath(err error, p string) error {
	var te *topo.Error
	if errors.As(err, &te) && te.Path == "" {
		return &topo.Error{Code: te.Code, Path: "/" + p, Err: te.Err}
	}
	return err
}
