package topoctl

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/tree"
)

func newCellCmd(stores *connector, out *printer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cell",
		Short: "List and edit the cells' CellInfo records (in the global cell)",
		Long: `A cell's CellInfo record, at cells/<cell>/CellInfo in the global cell,
says where the cell's own store is: its server address and root. --cell
NAME on any command connects through it (with the global cell's
implementation). "cell alias" edits the cells aliases.`,
		Example: `  topoctl cell set zone1 --server-address 127.0.0.1:2379 --root /vitess/zone1
  topoctl cell ls
  topoctl cell get zone1
  topoctl cell rm zone1
  topoctl --cell zone1 ls -R /`,
	}
	cmd.AddCommand(newCellLsCmd(stores, out), completesNames(newCellGetCmd(stores, out), stores, cellNames, true),
		completesNames(newCellSetCmd(stores, out), stores, cellNames, true), completesNames(newCellRmCmd(stores, out), stores, cellNames, true),
		newCellAliasCmd(stores, out))
	return groupCmd(cmd)
}

type cellRow struct {
	Name          string `json:"name"`
	ServerAddress string `json:"server_address"`
	Root          string `json:"root"`
}

func newCellLsCmd(stores *connector, out *printer) *cobra.Command {
	return &cobra.Command{
		Use: "ls",
		Example: `  topoctl cell ls
  topoctl cell ls -o json`,
		Short: "List the cells with their server address and root",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			st, err := stores.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			var names []string
			if err := probe(ctx, stores.timeout, func(c context.Context) error {
				names, err = st.srv.GetCellInfoNames(c)
				return err
			}); err != nil {
				return err
			}
			rows := []cellRow{}
			for _, n := range names {
				var ci *topodatapb.CellInfo
				if err := probe(ctx, stores.timeout, func(c context.Context) error {
					ci, err = st.srv.GetCellInfo(c, n)
					return err
				}); err != nil {
					if topo.IsErrType(err, topo.NoNode) {
						continue
					}
					return err
				}
				rows = append(rows, cellRow{n, ci.GetServerAddress(), ci.GetRoot()})
			}
			if out.jsonOut() {
				return out.printJSON(rows)
			}
			tw := out.table()
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.ServerAddress, r.Root)
			}
			return tw.Flush()
		},
	}
}

// printCell prints one cell's row as cell ls does (-o json: one object).
func printCell(out *printer, r cellRow) error {
	if out.jsonOut() {
		return out.printJSON(r)
	}
	tw := out.table()
	fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Name, r.ServerAddress, r.Root)
	return tw.Flush()
}

func newCellGetCmd(stores *connector, out *printer) *cobra.Command {
	return &cobra.Command{
		Use:     "get NAME",
		Example: "  topoctl cell get zone1\n  topoctl cell get zone1 -o json",
		Short:   "Print a cell's server address and root",
		Long: `Print the cell NAME with its server address and root, as one line of
"cell ls" (with --output json: {"name","server_address","root"}). A cell
without a CellInfo record fails with NoNode.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, ctx, done, err := stores.openCall(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			ci, err := st.srv.GetCellInfo(ctx, args[0])
			if err != nil {
				return err
			}
			return printCell(out, cellRow{args[0], ci.GetServerAddress(), ci.GetRoot()})
		},
	}
}

func newCellRmCmd(stores *connector, out *printer) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:     "rm NAME [--force]",
		Example: "  topoctl cell rm zone1\n  topoctl cell rm zone1 --force   # its store is gone, or its data stays",
		Short:   "Remove a cell's CellInfo (refused while the cell's store holds data)",
		Long: `Remove the CellInfo record of cell NAME from the global cell. The cell's
own store is read first: while it holds any file under the cell's root
(tablets, replication records, anything), nothing is removed and rm fails
with NodeNotEmpty, naming how many files are there; a cell store that
cannot be read fails as well. --force removes the record without looking:
the cell's data, if any, stays where it is, no longer reachable through
--cell. With --output json it prints the removed cell's
{"name","server_address","root"}. A cell without a CellInfo record fails
with NoNode. Cells aliases naming the cell are left as they are.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			st, err := stores.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			var ci *topodatapb.CellInfo
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				ci, err = st.srv.GetCellInfo(c, name)
				return err
			}); err != nil {
				return err
			}
			if !force {
				var tl tree.Listing
				err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
					conn, err := st.srv.ConnForCell(c, name)
					if err != nil {
						return namedStore(err, spec{impl: st.spec.impl, addr: ci.GetServerAddress(), root: ci.GetRoot()})
					}
					tl, err = tree.List(c, conn, "")
					return err
				})
				if err != nil && !topo.IsErrType(err, topo.NoNode) {
					return fmt.Errorf("cell %s: cannot read its store %s:%s to check that it holds no data (--force removes the record without looking): %w", name, ci.GetServerAddress(), ci.GetRoot(), err)
				}
				if n := len(tl.Files) + len(tl.Reserved) + len(tl.Odd); n > 0 {
					return backendkit.Wrap(topo.NodeNotEmpty, topo.CellInfoPath(name), fmt.Errorf("cell %s still holds %s under %s in %s: nothing removed (remove its data first, or --force removes the record and leaves the data)", name, plural(n, "file"), ci.GetRoot(), ci.GetServerAddress()))
				}
			}
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				return st.srv.DeleteCellInfo(c, name)
			}); err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(cellRow{name, ci.GetServerAddress(), ci.GetRoot()})
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove the record even when the cell's store holds data or cannot be read")
	return cmd
}

func newCellSetCmd(stores *connector, out *printer) *cobra.Command {
	var addr, root string
	cmd := &cobra.Command{
		Use:     "set NAME [--server-address ADDR] [--root ROOT]",
		Example: `  topoctl cell set zone1 --server-address 127.0.0.1:2379 --root /vitess/zone1`,
		Short:   "Create or change a cell's CellInfo",
		Long: `Create the CellInfo of cell NAME, or change the fields given, keeping the
others (and any field topokit does not know, so a record written by Vitess
keeps its extra fields). The write is a compare-and-set retried on
conflict.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			setAddr, setRoot := cmd.Flags().Changed("server-address"), cmd.Flags().Changed("root")
			if !setAddr && !setRoot {
				return usagef("cell set needs --server-address and/or --root")
			}
			if setRoot && strings.Trim(root, "/") == "" {
				// An empty root (or "/") is the store's whole key space:
				// the cell would read and write everything in it.
				return usagef("--root %q is the whole key space of the cell's store: give the cell a root of its own, such as /vitess/%s", root, args[0])
			}
			ctx := cmd.Context()
			st, err := stores.open(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			var row cellRow
			if err := probe(ctx, stores.timeout, func(c context.Context) error {
				return st.srv.UpdateCellInfoFields(c, args[0], func(ci *topodatapb.CellInfo) error {
					if setAddr {
						ci.ServerAddress = addr
					}
					if setRoot {
						ci.Root = root
					}
					row = cellRow{args[0], ci.GetServerAddress(), ci.GetRoot()}
					return nil
				})
			}); err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(row)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "server-address", "", "the cell store's server address")
	cmd.Flags().StringVar(&root, "root", "", "the cell's root in its store")
	return cmd
}
