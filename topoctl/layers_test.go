package topoctl

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxMethods is the most methods one type of topoctl may have: beyond it,
// features are hanging on one type again.
const maxMethods = 15

// maxHelpers is the most functions (command constructors apart) that may
// take one of topoctl's own types, other than the printer, as their first
// parameter: more is the same knot as too many methods, in another shape.
const maxHelpers = 3

// The layers of docs/architecture.md, checked on topoctl's source: no
// type carries more than maxMethods methods; no more than maxHelpers
// functions take one of topoctl's types as first parameter in their place
// (the printer apart: command-specific formatters print through it) and
// none takes the connection settings or the connector (the command
// constructors, new*Cmd, get the connector and the printer, and nothing
// else does); and no command file imports a backend package (the blank
// imports that register them are in backends.go).
func TestLayers(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	require.NoError(t, err)
	methods := map[string]int{}
	helpers := map[string][]string{}
	local := map[string]bool{}
	for _, p := range pkgs {
		for name, f := range p.Files {
			for _, im := range f.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				for _, b := range []string{"/topo/zk2topo", "/topo/consultopo", "/topo/etcd2topo", "/topo/memorytopo"} {
					if strings.HasSuffix(path, b) {
						assert.True(t, im.Name != nil && im.Name.Name == "_", "%s imports the backend package %s: reach it through topo/connect or an operation package", name, path)
					}
				}
			}
			for _, d := range f.Decls {
				if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
					for _, sp := range gd.Specs {
						local[sp.(*ast.TypeSpec).Name.Name] = true
					}
				}
				fd, ok := d.(*ast.FuncDecl)
				if !ok {
					continue
				}
				if fd.Recv != nil {
					methods[typeString(fd.Recv.List[0].Type)]++
					continue
				}
				if ps := fd.Type.Params.List; len(ps) > 0 && !(strings.HasPrefix(fd.Name.Name, "new") && strings.HasSuffix(fd.Name.Name, "Cmd")) {
					helpers[typeString(ps[0].Type)] = append(helpers[typeString(ps[0].Type)], fd.Name.Name)
					switch typeString(ps[0].Type) {
					case "connector", "settings":
						t.Errorf("%s: %s takes the %s as its first parameter: make it a method, or give it the values it needs", fset.Position(fd.Pos()), fd.Name.Name, typeString(ps[0].Type))
					}
				}
			}
		}
	}
	for typ, n := range methods {
		assert.LessOrEqual(t, n, maxMethods, "type %s has %d methods", typ, n)
	}
	for typ, fs := range helpers {
		if local[typ] && typ != "printer" {
			assert.LessOrEqual(t, len(fs), maxHelpers, "%d functions take a %s first: %s", len(fs), typ, strings.Join(fs, ", "))
		}
	}
}

// typeString names a receiver or parameter type without its "*".
func typeString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return typeString(t.X)
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return typeString(t.X) + "." + t.Sel.Name
	case *ast.IndexExpr:
		return typeString(t.X)
	}
	return ""
}

// operationPackages are the packages topoctl's commands, the web UI and Go
// programs share (docs/architecture.md, "Packages").
var operationPackages = []string{"../topo/tree", "../topo/copy", "../topo/decode", "../topo/inspect", "../topo/connect"}

// TestOperationsHaveNoCLI: the operation packages hold no CLI. They
// import no command-line, flag, terminal or progress-bar package, nor
// topoctl or ui, and they never print nor exit (no os.Stdout, os.Stderr,
// os.Exit, fmt.Print*, log): they return values and typed errors and
// report progress through callbacks.
func TestOperationsHaveNoCLI(t *testing.T) {
	t.Parallel()
	banned := map[string]bool{
		"flag": true, "log": true,
		"github.com/spf13/cobra": true, "github.com/spf13/pflag": true,
		"github.com/schollz/progressbar/v3": true, "golang.org/x/term": true,
		"github.com/topokit/topokit/topoctl": true, "github.com/topokit/topokit/ui": true,
	}
	bannedUse := map[string]bool{"os.Stdout": true, "os.Stderr": true, "os.Exit": true, "fmt.Print": true, "fmt.Printf": true, "fmt.Println": true}
	fset := token.NewFileSet()
	for _, dir := range operationPackages {
		pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		require.NoError(t, err)
		require.NotEmpty(t, pkgs, dir)
		for _, p := range pkgs {
			for name, f := range p.Files {
				for _, im := range f.Imports {
					path, _ := strconv.Unquote(im.Path.Value)
					assert.False(t, banned[path], "%s imports %s: an operation package holds no CLI", name, path)
				}
				ast.Inspect(f, func(n ast.Node) bool {
					if sel, ok := n.(*ast.SelectorExpr); ok {
						if use := typeString(sel); bannedUse[use] {
							t.Errorf("%s: uses %s: an operation package never prints; return values, report progress through a callback", fset.Position(sel.Pos()), use)
						}
					}
					return true
				})
			}
		}
	}
}
