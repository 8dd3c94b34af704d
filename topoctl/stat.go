package topoctl

import (
	"fmt"
	"path"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// statInfo is what stat prints about one path.
type statInfo struct {
	Path      string      `json:"path"`
	Type      string      `json:"type"` // file, directory, or "file and directory"
	Version   jsonVersion `json:"version,omitempty"`
	Size      *int        `json:"size,omitempty"`
	Ephemeral bool        `json:"ephemeral"`
	Entries   *int        `json:"entries,omitempty"`
	// Store is the store's own metadata (see storeMeta), by field name.
	Store map[string]any `json:"store,omitempty"`
}

func newStatCmd(o *options) *cobra.Command {
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
			st, ctx, done, err := o.openCall(cmd.Context())
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
					return backendkit.Wrap(topo.NoNode, "/", fmt.Errorf("the root is empty or absent in %s", st.name))
				}
				return topo.NewError(topo.NoNode, displayPath(p))
			}
			info.Type = strings.Join(types, " and ")
			meta := o.storeMeta(ctx, st.spec, p)
			if len(meta) > 0 {
				info.Store = map[string]any{}
				for _, f := range meta {
					info.Store[f.name] = f.value
				}
			}
			if o.jsonOut() {
				return o.printJSON(info)
			}
			o.printf("path:      %s\n", info.Path)
			o.printf("type:      %s\n", info.Type)
			if info.Size != nil {
				o.printf("version:   %s\n", info.Version)
				o.printf("size:      %s\n", plural(*info.Size, "byte"))
			}
			if info.Entries != nil {
				o.printf("entries:   %d\n", *info.Entries)
			}
			o.printf("ephemeral: %t\n", info.Ephemeral)
			if len(meta) > 0 {
				o.printf("%s metadata:\n", st.spec.impl)
			}
			width := 0
			for _, f := range meta {
				width = max(width, len(f.label()))
			}
			for _, f := range meta {
				v := f.value
				switch x := v.(type) {
				case []string:
					v = strings.Join(x, ", ")
				case string:
					if x == "" {
						v = "-"
					}
				}
				o.printf("  %-*s %v\n", width+1, f.label()+":", v)
			}
			return nil
		},
	}
}

func newVersionCmd(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print topoctl's version, commit and Go version",
		Long: `Print the module version topoctl was built from ("(devel)" for a build
from a checkout), the VCS commit when the build recorded it, the Go version
and the backends this binary has (see package topoctl to build one with
your own). With --output json it prints one object {"topoctl","commit",
"go","backends"} (the version is "topoctl": "version" fields are file
versions, numbers, everywhere else).`,
		Example: `  topoctl version
  topoctl version -o json`,
		Args: exactArgs(0),
		RunE: func(*cobra.Command, []string) error {
			v := map[string]string{"topoctl": "(unknown)", "go": "", "commit": ""}
			if bi, ok := debug.ReadBuildInfo(); ok {
				v["topoctl"], v["go"] = bi.Main.Version, bi.GoVersion
				for _, s := range bi.Settings {
					switch s.Key {
					case "vcs.revision":
						v["commit"] = s.Value
					case "vcs.modified":
						if s.Value == "true" {
							v["commit"] += " (modified)"
						}
					}
				}
			}
			backends := topo.Factories()
			if o.jsonOut() {
				return o.printJSON(map[string]any{"topoctl": v["topoctl"], "go": v["go"], "commit": v["commit"], "backends": backends})
			}
			o.printf("topoctl  %s\n", v["topoctl"])
			if v["commit"] != "" {
				o.printf("commit   %s\n", v["commit"])
			}
			o.printf("backends %s\n", strings.Join(backends, ", "))
			o.printf("go       %s\n", v["go"])
			return nil
		},
	}
}
