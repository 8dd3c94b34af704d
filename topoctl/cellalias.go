package topoctl

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/proto/topodatapb"
	"github.com/topokit/topokit/topo"
)

func newCellAliasCmd(stores *connector, out *printer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "alias",
		Short: "List and edit the cells aliases (in the global cell)",
		Long: `A cells alias names a group of cells (for example a region), as in
Vitess: its record is at cells_aliases/<alias>/CellsAlias in the global
cell. A cell belongs to at most one alias, and an alias cannot have the name
of a cell: a write that would break either rule fails with NodeExists and
writes nothing. The cells need not have a CellInfo.`,
		Example: `  topoctl cell alias create region1 --cells zone1,zone2
  topoctl cell alias ls`,
	}
	cmd.AddCommand(newCellAliasCreateCmd(stores, out), completesNames(newCellAliasGetCmd(stores, out), stores, aliasNames, true),
		completesNames(newCellAliasUpdateCmd(stores, out), stores, aliasNames, true),
		completesNames(newCellAliasDeleteCmd(stores, out), stores, aliasNames, true), newCellAliasLsCmd(stores, out))
	return groupCmd(cmd)
}

// aliasRow is one cells alias as "cell alias" prints it with -o json.
type aliasRow struct {
	Name  string   `json:"name"`
	Cells []string `json:"cells"`
}

// aliasCells returns --cells as a list: each value may hold several
// comma-separated cells; blanks are dropped.
func aliasCells(vals []string) []string {
	out := []string{}
	for _, v := range vals {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" {
				out = append(out, c)
			}
		}
	}
	return out
}

func newCellAliasCreateCmd(stores *connector, out *printer) *cobra.Command {
	var cells []string
	cmd := &cobra.Command{
		Use:     "create ALIAS --cells CELL[,CELL...]",
		Example: `  topoctl cell alias create region1 --cells zone1,zone2`,
		Short:   "Create a cells alias",
		Long: `Create the cells alias ALIAS holding the cells given. Creating an alias
that exists with the same cells succeeds without writing (so it can be
retried); one that exists with other cells is NodeExists, as is a cell that
already belongs to another alias or an alias named like a cell.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs := aliasCells(cells)
			if len(cs) == 0 {
				return usagef("cell alias create needs --cells")
			}
			st, err := stores.globalOnly(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				return st.srv.CreateCellsAlias(c, args[0], &topodatapb.CellsAlias{Cells: cs})
			}); err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(aliasRow{args[0], cs})
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&cells, "cells", nil, "the alias's cells, comma-separated (the flag may be repeated)")
	return cmd
}

func newCellAliasUpdateCmd(stores *connector, out *printer) *cobra.Command {
	var cells []string
	cmd := &cobra.Command{
		Use:     "update ALIAS --cells CELL[,CELL...]",
		Example: `  topoctl cell alias update region1 --cells zone1,zone2,zone3`,
		Short:   "Set the cells of a cells alias (creating it if absent)",
		Long: `Set the cells of ALIAS to the ones given, keeping any other field of its
record (a record written by Vitess keeps its extra fields); an absent alias
is created, as Vitess's UpdateCellsAlias does. The write is a
compare-and-set retried on conflict; nothing is written when the cells are
already those. A cell that belongs to another alias is NodeExists.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs := aliasCells(cells)
			if len(cs) == 0 {
				return usagef("cell alias update needs --cells (delete an alias with \"cell alias delete\")")
			}
			st, err := stores.globalOnly(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				return st.srv.UpdateCellsAlias(c, args[0], func(ca *topodatapb.CellsAlias) error {
					if slices.Equal(ca.GetCells(), cs) {
						return &topo.Error{Code: topo.NoUpdateNeeded, Path: topo.CellsAliasPath(args[0])}
					}
					ca.Cells = cs
					return nil
				})
			}); err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(aliasRow{args[0], cs})
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&cells, "cells", nil, "the alias's cells, comma-separated (the flag may be repeated)")
	return cmd
}

func newCellAliasGetCmd(stores *connector, out *printer) *cobra.Command {
	return &cobra.Command{
		Use: "get ALIAS",
		Example: `  topoctl cell alias get region1
  topoctl cell alias get region1 -o json`,
		Short: "Print the cells of a cells alias, one per line",
		Long: `Print the cells of ALIAS, one per line in the record's order; with
--output json {"name","cells"}. An unknown alias is NoNode.`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := stores.globalOnly(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			var ca *topodatapb.CellsAlias
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				ca, err = st.srv.GetCellsAlias(c, args[0])
				return err
			}); err != nil {
				return err
			}
			row := aliasRow{Name: args[0], Cells: append([]string{}, ca.GetCells()...)}
			if out.jsonOut() {
				return out.printJSON(row)
			}
			for _, c := range row.Cells {
				out.printf("%s\n", c)
			}
			return nil
		},
	}
}

func newCellAliasDeleteCmd(stores *connector, out *printer) *cobra.Command {
	return &cobra.Command{
		Use:     "delete ALIAS",
		Example: `  topoctl cell alias delete region1`,
		Short:   "Delete a cells alias (its cells are left as they are)",
		Args:    exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := stores.globalOnly(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				return st.srv.DeleteCellsAlias(c, args[0])
			}); err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(map[string]any{"name": args[0], "deleted": 1})
			}
			return nil
		},
	}
}

func newCellAliasLsCmd(stores *connector, out *printer) *cobra.Command {
	return &cobra.Command{
		Use: "ls",
		Example: `  topoctl cell alias ls
  topoctl cell alias ls -o json`,
		Short: "List the cells aliases with their cells",
		Long: `List every cells alias, sorted by name, as "ALIAS CELL,CELL...", from one
read of cells_aliases/; with --output json a list of {"name","cells"}.`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := stores.globalOnly(cmd.Context(), cmd)
			if err != nil {
				return err
			}
			defer st.Close()
			var all map[string]*topodatapb.CellsAlias
			if err := probe(cmd.Context(), stores.timeout, func(c context.Context) error {
				all, err = st.srv.GetCellsAliases(c)
				return err
			}); err != nil {
				return err
			}
			rows := make([]aliasRow, 0, len(all))
			for n, ca := range all {
				rows = append(rows, aliasRow{Name: n, Cells: append([]string{}, ca.GetCells()...)})
			}
			sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
			if out.jsonOut() {
				return out.printJSON(rows)
			}
			tw := out.table()
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\n", r.Name, strings.Join(r.Cells, ","))
			}
			return tw.Flush()
		},
	}
}
