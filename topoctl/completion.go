package topoctl

// Shell completion of store paths: the commands that take a path complete
// it from the store their connection flags name, one directory level at a
// time, as a shell completes file names.

import (
	"context"
	goio "io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// completionTimeout bounds a completion's store calls: a shell waits for
// them at every Tab.
const completionTimeout = 3 * time.Second

// pathArg says how a command's store path argument completes.
type pathArg struct {
	// index is the position of the argument that is a store path; the
	// arguments before it are local directories (import, export).
	index int
	// dirsOnly offers directories only: the argument names a directory
	// (lock, copy, diff, import, export).
	dirsOnly bool
	// storeFlag, when set, names the flag (IMPL:ADDR:ROOT) of the store
	// the path is in (copy's and diff's --from); when that flag is not
	// given, the connection flags name it.
	storeFlag string
	// variadic makes every argument from index on a store path (watch
	// FILE FILE...).
	variadic bool
}

// completesPaths makes cmd's first argument complete as a store path (see
// completePath).
func completesPaths(cmd *cobra.Command, stores *connector) *cobra.Command {
	return completesPathArg(cmd, stores, pathArg{})
}

// completesPathArg makes cmd's argument pa.index complete as a store path
// (see completePath), the arguments before it as local directories, and
// none after it (each, with pa.variadic, as a store path too).
func completesPathArg(cmd *cobra.Command, stores *connector, pa pathArg) *cobra.Command {
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch {
		case len(args) < pa.index:
			return nil, cobra.ShellCompDirectiveFilterDirs
		case len(args) > pa.index && !pa.variadic:
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completePath(c.Context(), stores, c, toComplete, pa)
	}
	return cmd
}

// nameSource lists the names a command argument takes from the store
// st: cells, cells aliases or elections.
type nameSource func(ctx context.Context, st *store) ([]string, error)

// cellNames are the cells' names (their CellInfo records in the global
// cell).
func cellNames(ctx context.Context, st *store) ([]string, error) {
	return st.srv.GetCellInfoNames(ctx)
}

// aliasNames are the cells aliases' names (in the global cell).
func aliasNames(ctx context.Context, st *store) ([]string, error) {
	aliases, err := st.srv.GetCellsAliases(ctx)
	names := make([]string, 0, len(aliases))
	for n := range aliases {
		names = append(names, n)
	}
	slices.Sort(names)
	return names, err
}

// electionNames are the elections' names in the cell the connection
// flags name (the directories under "elections").
func electionNames(ctx context.Context, st *store) ([]string, error) {
	des, err := st.conn.ListDir(ctx, backendkit.ElectionsDirName, false)
	names := make([]string, 0, len(des))
	for _, d := range des {
		names = append(names, d.Name)
	}
	return names, err
}

// completesNames makes cmd's first argument complete as a name of list:
// cells and aliases from the global cell (global), elections from the
// cell the connection flags name.
func completesNames(cmd *cobra.Command, stores *connector, list nameSource, global bool) *cobra.Command {
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeName(c, stores, toComplete, list, global)
	}
	return cmd
}

// completeName returns the names list gives that start with toComplete,
// read from the global cell when global, else from the cell the
// connection flags name; any failure completes nothing.
func completeName(cmd *cobra.Command, stores *connector, toComplete string, list nameSource, global bool) ([]string, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	ctx, quiet, cancel := completionConnector(cmd.Context(), cmd, stores)
	defer cancel()
	if quiet == nil {
		return nil, none | cobra.ShellCompDirectiveError
	}
	cell := quiet.cell
	if global {
		cell = ""
	}
	st, err := quiet.openSpec(ctx, spec{impl: quiet.impl, addr: quiet.addr, root: quiet.root, defaulted: quiet.addrDefaulted}, cell)
	if err != nil {
		return nil, none | cobra.ShellCompDirectiveError
	}
	defer st.Close()
	names, err := list(ctx, st)
	if err != nil {
		return nil, none
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return out, none
}

// completionConnector resolves the connection flags of cmd itself (a
// completion runs no command, so nothing resolved them) into a connector
// that prints nothing, and returns it with a context bounded by
// completionTimeout; quiet is nil when the flags do not resolve.
func completionConnector(ctx context.Context, cmd *cobra.Command, stores *connector) (_ context.Context, quiet *connector, cancel func()) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel = context.WithTimeout(ctx, completionTimeout)
	quiet = &connector{settings: stores.settings, out: newPrinter(streams{Stdout: goio.Discard, Stderr: goio.Discard})}
	if quiet.resolve(cmd.Flags()) != nil || quiet.resolveStore(cmd.Flags()) != nil {
		return ctx, nil, cancel
	}
	return ctx, quiet, cancel
}

// completePath returns the entries of the directory toComplete is in
// whose paths start with toComplete, as typed (with or without the
// leading "/"), directories with a trailing "/" so that the next Tab goes
// on into them (only directories with pa.dirsOnly). It reads the store
// of pa.storeFlag when that flag is given, else the one the connection
// flags name, with nothing printed; any failure completes nothing.
func completePath(ctx context.Context, stores *connector, cmd *cobra.Command, toComplete string, pa pathArg) ([]string, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	ctx, quiet, cancel := completionConnector(ctx, cmd, stores)
	defer cancel()
	if quiet == nil {
		return nil, none | cobra.ShellCompDirectiveError
	}
	var from string
	if pa.storeFlag != "" {
		from, _ = cmd.Flags().GetString(pa.storeFlag)
	}
	st, err := quiet.openFrom(ctx, pa.storeFlag, from)
	if err != nil {
		return nil, none | cobra.ShellCompDirectiveError
	}
	defer st.Close()
	typed := toComplete[:strings.LastIndexByte(toComplete, '/')+1]
	dir, err := topo.CleanDirPath(typed)
	if err != nil {
		return nil, none
	}
	entries, err := st.conn.ListDir(ctx, dir, true)
	if err != nil {
		return nil, none
	}
	var out []string
	for _, e := range entries {
		if pa.dirsOnly && e.Type != topo.TypeDirectory {
			continue
		}
		p := typed + e.Name
		if e.Type == topo.TypeDirectory {
			p += "/"
		}
		if strings.HasPrefix(p, toComplete) && !topo.IsReserved(strings.Trim(p, "/")) {
			out = append(out, p)
		}
	}
	return out, none | cobra.ShellCompDirectiveNoSpace
}
