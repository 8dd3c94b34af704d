package doccheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// moduleRoot is the repository root, relative to this package.
const moduleRoot = "../.."

// pkgIdents is what one package name declares: top-level names, and
// "Type.Member" for the methods of its types and the fields and methods of
// its struct and interface types.
type pkgIdents struct {
	names   map[string]bool
	types   map[string]bool
	members map[string]bool
}

// scanModule parses every Go file of the module (not of the nested
// modules, testdata or hidden directories) and returns the exported
// identifiers by package name. From _test.go files it takes only the
// Example, Test, Benchmark and Fuzz functions, which docs cite as
// runnable counterparts.
func scanModule(t *testing.T) map[string]*pkgIdents {
	t.Helper()
	pkgs := map[string]*pkgIdents{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(moduleRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if p != moduleRoot && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			if p != moduleRoot {
				if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		name := strings.TrimSuffix(f.Name.Name, "_test")
		if name == "main" {
			return nil
		}
		pi := pkgs[name]
		if pi == nil {
			pi = &pkgIdents{names: map[string]bool{}, types: map[string]bool{}, members: map[string]bool{}}
			pkgs[name] = pi
		}
		addFile(pi, f, strings.HasSuffix(p, "_test.go"))
		return nil
	})
	require.NoError(t, err)
	return pkgs
}

func addFile(pi *pkgIdents, f *ast.File, test bool) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			name := d.Name.Name
			if test {
				if d.Recv == nil && (strings.HasPrefix(name, "Example") || strings.HasPrefix(name, "Test") ||
					strings.HasPrefix(name, "Benchmark") || strings.HasPrefix(name, "Fuzz")) {
					pi.names[name] = true
				}
				continue
			}
			if !ast.IsExported(name) {
				continue
			}
			if d.Recv == nil {
				pi.names[name] = true
				continue
			}
			if recv := recvName(d.Recv.List[0].Type); recv != "" {
				pi.members[recv+"."+name] = true
			}
		case *ast.GenDecl:
			if test {
				continue
			}
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !ast.IsExported(s.Name.Name) {
						continue
					}
					pi.names[s.Name.Name] = true
					pi.types[s.Name.Name] = true
					addMembers(pi, s.Name.Name, s.Type)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if ast.IsExported(n.Name) {
							pi.names[n.Name] = true
						}
					}
				}
			}
		}
	}
}

func recvName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return recvName(x.X)
	case *ast.IndexExpr:
		return recvName(x.X)
	case *ast.IndexListExpr:
		return recvName(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

func addMembers(pi *pkgIdents, typ string, e ast.Expr) {
	var fields *ast.FieldList
	switch x := e.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			pi.members[typ+"."+n.Name] = true
		}
		if len(f.Names) == 0 { // embedded: its name is a member too
			if n := recvName(f.Type); n != "" {
				pi.members[typ+"."+n] = true
			}
		}
	}
}

var (
	// off matches a part of a doc that is not checked, such as a table
	// of names that no longer exist: from <!-- doccheck:off ... --> to
	// <!-- doccheck:on -->.
	off = regexp.MustCompile(`(?s)<!-- doccheck:off.*?<!-- doccheck:on -->`)
	// codeSpan matches fenced code blocks and inline code spans.
	codeSpan = regexp.MustCompile("(?s)```.*?```|`[^`\n]+`")
	// qualified matches pkg.Name and pkg.Type.Member, also as
	// (*pkg.Type).Member.
	qualified = regexp.MustCompile(`(^|[^\w./])([a-z][a-z0-9]*)\.([A-Z]\w*)(\)?\.([A-Z]\w*))?`)
)

// TestDocIdentifiersExist checks that every Go identifier of the module
// that README.md and docs/*.md quote in code (inline or fenced) as
// pkg.Name, pkg.Type.Method or (*pkg.Type).Method exists: a doc must not
// send a reader to a function that is not there. Qualifiers that are not
// a package name of the module (variables, other modules, the standard
// library) are not checked, nor parts between <!-- doccheck:off --> and
// <!-- doccheck:on -->.
func TestDocIdentifiersExist(t *testing.T) {
	pkgs := scanModule(t)
	require.Contains(t, pkgs, "memorytopo", "the module was not found")
	docs, err := filepath.Glob(filepath.Join(moduleRoot, "docs", "*.md"))
	require.NoError(t, err)
	docs = append(docs, filepath.Join(moduleRoot, "README.md"))
	sort.Strings(docs)
	checked := 0
	for _, doc := range docs {
		data, err := os.ReadFile(doc)
		require.NoError(t, err)
		text := off.ReplaceAllString(string(data), "")
		for _, span := range codeSpan.FindAllString(text, -1) {
			for _, m := range qualified.FindAllStringSubmatch(span, -1) {
				pkg, name, member := m[2], m[3], m[5]
				pi, ok := pkgs[pkg]
				if !ok {
					continue
				}
				checked++
				ref := pkg + "." + name
				if !pi.names[name] {
					t.Errorf("%s: %s does not exist", filepath.Base(doc), ref)
					continue
				}
				if member != "" && pi.types[name] && !pi.members[name+"."+member] {
					t.Errorf("%s: %s.%s does not exist", filepath.Base(doc), ref, member)
				}
			}
		}
	}
	t.Logf("%d references checked", checked)
	require.NotZero(t, checked, "no identifier found in the docs")
}
