package topoctl

// Shell completion of store paths: the commands that take a path complete
// it from the store their connection flags name, one directory level at a
// time, as a shell completes file names.

import (
	"context"
	goio "io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
)

// completionTimeout bounds a completion's store calls: a shell waits for
// them at every Tab.
const completionTimeout = 3 * time.Second

// completesPaths makes cmd's first argument complete as a store path (see
// completePath).
func completesPaths(cmd *cobra.Command, stores *connector) *cobra.Command {
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completePath(c.Context(), stores, c, toComplete)
	}
	return cmd
}

// completePath returns the entries of the directory toComplete is in
// whose paths start with toComplete, as typed (with or without the
// leading "/"), directories with a trailing "/" so that the next Tab goes
// on into them. It resolves the connection flags of cmd itself (a
// completion runs no command, so nothing resolved them) and opens the
// store with nothing printed; any failure completes nothing.
func completePath(ctx context.Context, stores *connector, cmd *cobra.Command, toComplete string) ([]string, cobra.ShellCompDirective) {
	none := cobra.ShellCompDirectiveNoFileComp
	quiet := &connector{settings: stores.settings, out: newPrinter(streams{Stdout: goio.Discard, Stderr: goio.Discard})}
	if quiet.resolve(cmd.Flags()) != nil || quiet.resolveStore(cmd.Flags()) != nil {
		return nil, none | cobra.ShellCompDirectiveError
	}
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	st, err := quiet.open(ctx)
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
