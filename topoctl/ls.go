package topoctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/tree"
)

// entry is one listed directory entry, as ls and tree print it.
type entry struct {
	Name      string      `json:"name"`
	Path      string      `json:"path"`
	Type      string      `json:"type"`
	Ephemeral bool        `json:"ephemeral"`
	Version   jsonVersion `json:"version,omitempty"`
	Children  []*entry    `json:"children,omitempty"`
}

// displayPath renders a canonical path the way users type it.
func displayPath(p string) string { return "/" + p }

// exactArgs is cobra.ExactArgs returning a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("%s takes %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// minArgs is cobra.MinimumNArgs returning a usage error.
func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("%s takes at least %d argument(s), got %d", cmd.CommandPath(), n, len(args))
		}
		return nil
	}
}

// rangeArgs is cobra.RangeArgs returning a usage error.
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("%s takes %d to %d argument(s), got %d", cmd.CommandPath(), lo, hi, len(args))
		}
		return nil
	}
}

func argOr(args []string, i int, def string) string {
	if len(args) > i {
		return args[i]
	}
	return def
}

// list reads the entries of dir (canonical) with tree.Entries, with
// versions when long, and their descendants when recursive, noting on
// stderr the directories no path reaches. Entries that vanish while
// walking are left out.
func list(ctx context.Context, out *printer, conn topo.Conn, timeout time.Duration, dir string, long, recursive bool) ([]*entry, error) {
	es, err := tree.Entries(ctx, conn, dir, tree.EntriesOptions{Versions: long, Recursive: recursive, CallTimeout: timeout,
		Unreachable: func(dir, name string) {
			out.eprintf("note: %s is no canonical path (written by another tool): its contents are not listed; get -R --keys-only %s shows the keys under it\n",
				strconv.Quote(displayPath(backendkit.JoinPath(dir, name))), displayPath(dir)+"/")
		}})
	if err != nil {
		return nil, err
	}
	return entriesOf(es), nil
}

// entriesOf converts tree entries into ls's and tree's entries.
func entriesOf(es []*tree.Entry) []*entry {
	out := make([]*entry, len(es))
	for i, e := range es {
		out[i] = &entry{Name: e.Name, Path: displayPath(e.Path), Type: e.Type.String(), Ephemeral: e.Ephemeral}
		if e.Version != nil {
			out[i].Version = jsonVersion(e.Version.String())
		}
		if e.Children != nil {
			out[i].Children = entriesOf(e.Children)
		}
	}
	return out
}

// listOrFile lists dir; when dir is a file rather than a directory it
// returns that file as the only entry, as ls does.
func listOrFile(ctx context.Context, out *printer, st *store, timeout time.Duration, arg string, long, recursive bool) ([]*entry, error) {
	conn := st.conn
	dir, err := topo.CleanDirPath(arg)
	if err != nil {
		return nil, err
	}
	entries, err := list(ctx, out, conn, timeout, dir, long, recursive)
	if dir == "" && topo.IsErrType(err, topo.NoNode) {
		// An empty store is an empty root, not an error; but say so, as a
		// wrong root or address looks the same.
		out.eprintf("note: the root is empty or absent (nothing under it); check --topo-global-root and the address%s\n", memoryHint(st.name))
		return []*entry{}, nil
	}
	if err == nil && dir == "" && len(entries) == 0 {
		out.eprintf("note: the root is empty or absent (nothing under it); check --topo-global-root and the address%s\n", memoryHint(st.name))
	}
	if err == nil || !topo.IsErrType(err, topo.NoNode) {
		return entries, err
	}
	cctx, cancel := callCtx(ctx, timeout)
	_, v, gerr := conn.Get(cctx, dir)
	cancel()
	if gerr != nil {
		return nil, err
	}
	e := &entry{Name: dir[strings.LastIndexByte(dir, '/')+1:], Path: displayPath(dir), Type: topo.TypeFile.String()}
	if long {
		e.Version = jsonVersion(v.String())
	}
	return []*entry{e}, nil
}

func flatten(es []*entry, out []*entry) []*entry {
	for _, e := range es {
		out = append(out, e)
		out = flatten(e.Children, out)
	}
	return out
}

func ephemeralMark(e *entry) string {
	if e.Ephemeral {
		return "ephemeral"
	}
	return "-"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newLsCmd(stores *connector, out *printer) *cobra.Command {
	var long, recursive bool
	cmd := &cobra.Command{
		Use: "ls [-l] [-R] [DIR]",
		Example: `  topoctl ls -l /keyspaces/commerce
  topoctl --cell zone1 ls -R /tablets`,
		Short: "List a directory (default: the root)",
		Long: `List the entries of DIR (default "/"), one per line. -R lists every
descendant by its full path. -l adds the type, the ephemeral flag (lock and
election entries, which vanish with their owner's session) and each file's
version. With --output json it prints one JSON array of entries.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := stores.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := listOrFile(cmd.Context(), out, st, stores.timeout, argOr(args, 0, "/"), long, recursive)
			if err != nil {
				return err
			}
			if recursive {
				entries = flatten(entries, nil)
			}
			if out.jsonOut() {
				for _, e := range entries {
					e.Children = nil
				}
				return out.printJSON(entries)
			}
			tw := out.table()
			for _, e := range entries {
				name := e.Name
				if recursive {
					name = e.Path
				}
				if long {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", e.Type, ephemeralMark(e), orDash(string(e.Version)), name)
				} else {
					fmt.Fprintln(tw, name)
				}
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show type, ephemeral flag and version")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "list every descendant, by full path")
	return cmd
}

func newTreeCmd(stores *connector, out *printer) *cobra.Command {
	var long bool
	cmd := &cobra.Command{
		Use:     "tree [-l] [DIR]",
		Example: `  topoctl tree -l /keyspaces`,
		Short:   "Print a directory and everything under it as a tree",
		Long: `Print DIR (default "/") and all its descendants as a tree. -l adds each
entry's type, ephemeral flag and file version. With --output json it prints
one JSON array of entries, each with its children.`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := stores.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			arg := argOr(args, 0, "/")
			entries, err := listOrFile(cmd.Context(), out, st, stores.timeout, arg, long, true)
			if err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(entries)
			}
			dir, _ := topo.CleanDirPath(arg)
			out.printf("%s\n", displayPath(dir))
			printTree(out, entries, "", long)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show type, ephemeral flag and version")
	return cmd
}

func printTree(out *printer, es []*entry, indent string, long bool) {
	for i, e := range es {
		branch, next := "├── ", "│   "
		if i == len(es)-1 {
			branch, next = "└── ", "    "
		}
		line := indent + branch + e.Name
		if long {
			attrs := []string{e.Type}
			if e.Ephemeral {
				attrs = append(attrs, "ephemeral")
			}
			if e.Version != "" {
				attrs = append(attrs, "version "+string(e.Version))
			}
			line += "  [" + strings.Join(attrs, ", ") + "]"
		}
		out.printf("%s\n", line)
		printTree(out, e.Children, indent+next, long)
	}
}
