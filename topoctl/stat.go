package topoctl

import (
	"fmt"
	"path"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/inspect"
)

// statInfo is what stat prints about one path.
type statInfo struct {
	Path      string      `json:"path"`
	Type      string      `json:"type"` // file, directory, or "file and directory"
	Version   jsonVersion `json:"version,omitempty"`
	Size      *int        `json:"size,omitempty"`
	Ephemeral bool        `json:"ephemeral"`
	Entries   *int        `json:"entries,omitempty"`
	// Store is the store's own metadata (see inspect.StoreMeta), by field name.
	Store map[string]any `json:"store,omitempty"`
}

func newStatCmd(stores *connector, out *printer) *cobra.Command {
	return &cobra.Command{
		Use:   "stat PATH",
		Short: "Show a path's type, version, size and ephemeral flag",
		Long: `Show what PATH is: a file (with its version and size in bytes), a directory
(with its number of entries), or both (a store may hold a file "a" and a
file "a/b"), and whether it is ephemeral (a lock or election entry, which
vanishes with its owner's session or lease). Then, where the store has
them, the store's own metadata, read with a client of topoctl's own:
  etcd2:  key, create_revision, mod_revision, key_version, lease (hex id, or -)
  zk2:    znode, czxid, mzxid, ctime, mtime, data_version, child_version,
          children, ephemeral_owner (session id, or -), acl (scheme:id:perms)
  consul: key, create_index, modify_index, lock_index, flags, session (or -)
(etcd and Consul keep no keys for directories; ZooKeeper's znodes show for
both). With --output json it prints one object {"path","type","version",
"size","ephemeral","entries","store"}, "store" holding those fields.`,
		Example: `  topoctl stat /keyspaces/commerce/Keyspace
  topoctl stat -o json /keyspaces`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := topo.CleanDirPath(args[0])
			if err != nil {
				return err
			}
			st, ctx, done, err := stores.openCall(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			info := statInfo{Path: displayPath(p)}
			var types []string
			if p != "" {
				value, v, gerr := st.conn.Get(ctx, p)
				switch {
				case gerr == nil:
					types = append(types, "file")
					n := len(value)
					info.Version, info.Size = jsonVersion(v.String()), &n
				case !topo.IsErrType(gerr, topo.NoNode):
					return at(gerr, p)
				}
			}
			des, lerr := st.conn.ListDir(ctx, p, false)
			switch {
			case lerr == nil:
				types = append(types, "directory")
				n := len(des)
				info.Entries = &n
			case !topo.IsErrType(lerr, topo.NoNode):
				return at(lerr, p)
			}
			if p != "" {
				if pdes, err := st.conn.ListDir(ctx, path.Dir("/" + p)[1:], true); err == nil {
					for _, de := range pdes {
						if de.Name == path.Base(p) {
							info.Ephemeral = de.Ephemeral
							if len(types) == 0 {
								types = append(types, de.Type.String())
							}
						}
					}
				}
			}
			if len(types) == 0 {
				if p == "" {
					return backendkit.Wrap(topo.NoNode, "/", fmt.Errorf("the root is empty or absent in %s%s", st.name, memoryHint(st.name)))
				}
				return topo.NewError(topo.NoNode, displayPath(p))
			}
			info.Type = strings.Join(types, " and ")
			meta, merr := inspect.StoreMeta(ctx, st.conn, p)
			if merr != nil {
				// A complement, never the answer.
				out.log.Debug("cannot read the store's metadata", "path", displayPath(p), "err", merr)
				meta = nil
			}
			if len(meta) > 0 {
				info.Store = map[string]any{}
				for _, f := range meta {
					info.Store[f.Name] = f.Value
				}
			}
			if out.jsonOut() {
				return out.printJSON(info)
			}
			out.printf("path:      %s\n", info.Path)
			out.printf("type:      %s\n", info.Type)
			if info.Size != nil {
				out.printf("version:   %s\n", info.Version)
				out.printf("size:      %s\n", plural(*info.Size, "byte"))
			}
			if info.Entries != nil {
				out.printf("entries:   %d\n", *info.Entries)
			}
			out.printf("ephemeral: %t\n", info.Ephemeral)
			if len(meta) > 0 {
				out.printf("%s metadata:\n", st.spec.impl)
			}
			width := 0
			for _, f := range meta {
				width = max(width, len(metaLabel(f)))
			}
			for _, f := range meta {
				v := f.Value
				switch x := v.(type) {
				case []string:
					v = strings.Join(x, ", ")
				case string:
					if x == "" {
						v = "-"
					}
				}
				out.printf("  %-*s %v\n", width+1, metaLabel(f)+":", v)
			}
			return nil
		},
	}
}

func newVersionCmd(stores *connector, out *printer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print topoctl's version, commit and Go version",
		Long: `Print the module version topoctl was built from (for a build from a
checkout, a pseudo-version v0.0.0-TIME-COMMIT when the build recorded the
VCS commit, else "(devel)"), the VCS commit, its time and whether the tree had
uncommitted changes when the build recorded them ("go build" in a git
checkout does, unless -buildvcs=false; a git worktree or a test binary
records none), the Go version and the backends this binary has (see
package topoctl to build one with your own). With --output json it prints
one object {"topoctl","commit","commit_time","go","backends"} (the version
is "topoctl": "version" fields are file versions, numbers, everywhere
else; commit and commit_time are "" when not recorded).`,
		Example: `  topoctl version
  topoctl version -o json`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			bi, _ := debug.ReadBuildInfo() // nil when it has none
			b := buildVersionOf(bi)
			backends := topo.Factories()
			if out.jsonOut() {
				return out.printJSON(map[string]any{"topoctl": b.version, "go": b.goVersion, "commit": b.commit, "commit_time": b.commitTime, "backends": backends})
			}
			out.printf("%s", b.text(backends))
			return nil
		},
	}
}

// buildVersion is what the binary's build recorded about itself.
type buildVersion struct {
	// version is the main module's version: "(devel)" for a build from a
	// checkout, "" when the build recorded none (a test binary),
	// "(unknown)" without build information.
	version string
	// commit is vcs.revision, with " (modified)" when vcs.modified is
	// true; "" when not recorded.
	commit string
	// commitTime is vcs.time (RFC 3339), "" when not recorded.
	commitTime string
	goVersion  string
}

// buildVersionOf reads bi (nil: no build information).
func buildVersionOf(bi *debug.BuildInfo) buildVersion {
	if bi == nil {
		return buildVersion{version: "(unknown)"}
	}
	b := buildVersion{version: bi.Main.Version, goVersion: bi.GoVersion}
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.time":
			b.commitTime = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && b.commit != "" {
		b.commit += " (modified)"
	}
	return b
}

// text is version's text output: a first line "topoctl VERSION" (just
// "topoctl" when the version is empty), then one aligned line for each of
// the commit and its time (when recorded), the backends and Go.
func (b buildVersion) text(backends []string) string {
	var sb strings.Builder
	sb.WriteString("topoctl")
	if b.version != "" {
		sb.WriteString(" " + b.version)
	}
	sb.WriteString("\n")
	if b.commit != "" {
		fmt.Fprintf(&sb, "commit      %s\n", b.commit)
	}
	if b.commitTime != "" {
		fmt.Fprintf(&sb, "commit time %s\n", b.commitTime)
	}
	fmt.Fprintf(&sb, "backends    %s\n", strings.Join(backends, ", "))
	fmt.Fprintf(&sb, "go          %s\n", b.goVersion)
	return sb.String()
}

// metaLabel is the name of a store metadata field as stat's text output
// shows it.
func metaLabel(f inspect.MetaField) string { return strings.ReplaceAll(f.Name, "_", " ") }
