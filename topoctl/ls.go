package topoctl

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

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
func list(o *options, ctx context.Context, conn topo.Conn, dir string, long, recursive bool) ([]*entry, error) {
	es, err := tree.Entries(ctx, conn, dir, tree.EntriesOptions{Versions: long, Recursive: recursive, CallTimeout: o.timeout,
		Unreachable: func(dir, name string) {
			o.eprintf("note: %s is no canonical path (written by another tool): its contents are not listed; get -R --keys-only %s shows the keys under it\n",
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
func listOrFile(o *options, ctx context.Context, conn topo.Conn, arg string, long, recursive bool) ([]*entry, error) {
	dir, err := topo.CleanDirPath(arg)
	if err != nil {
		return nil, err
	}
	entries, err := list(o, ctx, conn, dir, long, recursive)
	if dir == "" && topo.IsErrType(err, topo.NoNode) {
		// An empty store is an empty root, not an error; but say so, as a
		// wrong root or address looks the same.
		o.eprintf("note: the root is empty or absent (nothing under it); check --topo-global-root and the address\n")
		return []*entry{}, nil
	}
	if err == nil && dir == "" && len(entries) == 0 {
		o.eprintf("note: the root is empty or absent (nothing under it); check --topo-global-root and the address\n")
	}
	if err == nil || !topo.IsErrType(err, topo.NoNode) {
		return entries, err
	}
	cctx, cancel := o.callCtx(ctx)
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

func newLsCmd(o *options) *cobra.Command {
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
			st, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := listOrFile(o, cmd.Context(), st.conn, argOr(args, 0, "/"), long, recursive)
			if err != nil {
				return err
			}
			if recursive {
				entries = flatten(entries, nil)
			}
			if o.jsonOut() {
				for _, e := range entries {
					e.Children = nil
				}
				return o.printJSON(entries)
			}
			tw := tabwriter.NewWriter(o.io.Stdout, 0, 4, 2, ' ', 0)
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

func newTreeCmd(o *options) *cobra.Command {
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
			st, err := o.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			arg := argOr(args, 0, "/")
			entries, err := listOrFile(o, cmd.Context(), st.conn, arg, long, true)
			if err != nil {
				return err
			}
			if o.jsonOut() {
				return o.printJSON(entries)
			}
			dir, _ := topo.CleanDirPath(arg)
			o.printf("%s\n", displayPath(dir))
			printTree(o, entries, "", long)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show type, ephemeral flag and version")
	return cmd
}

func printTree(o *options, es []*entry, indent string, long bool) {
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
		o.printf("%s\n", line)
		printTree(o, e.Children, indent+next, long)
	}
}
