package test

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// RoundTripRow is one row of a backend's table in docs/roundtrips.md: the
// operation (its first cell, backquotes trimmed) and the most store
// requests it may send (its second cell). Flat marks a row whose second
// cell is "flat in N" (a handover whose cost must not grow with the
// number of waiters); its Max is -1.
type RoundTripRow struct {
	Op   string
	Max  int64
	Flat bool
}

// RoundTripTable reads the table of the section of the Markdown file at
// path whose "## " heading starts with section (e.g. "etcd", "Consul"):
// its rows whose second cell is a number or "flat in N", in order. The
// header row and its rule are skipped. It fails t when the file cannot
// be read or the section has no such row, so that a test enforcing the
// table can never pass on an empty one.
func RoundTripTable(t testing.TB, path, section string) []RoundTripRow {
	t.Helper()
	doc, err := os.ReadFile(path)
	require.NoError(t, err)
	var rows []RoundTripRow
	in := false
	for line := range strings.SplitSeq(string(doc), "\n") {
		if h, ok := strings.CutPrefix(line, "## "); ok {
			in = strings.HasPrefix(strings.TrimSpace(h), section)
			continue
		}
		cells := strings.Split(line, "|")
		if !in || len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(line), "|") {
			continue
		}
		op, n := strings.Trim(strings.TrimSpace(cells[1]), "`"), strings.TrimSpace(cells[2])
		if max, err := strconv.ParseInt(n, 10, 64); err == nil {
			rows = append(rows, RoundTripRow{Op: op, Max: max})
		} else if n == "flat in N" {
			rows = append(rows, RoundTripRow{Op: op, Max: -1, Flat: true})
		}
	}
	require.NotEmpty(t, rows, "%s has no %s table", path, section)
	return rows
}

// RoundTripLimits is RoundTripTable's numeric rows as a map from
// operation to its most requests.
func RoundTripLimits(t testing.TB, path, section string) map[string]int64 {
	t.Helper()
	m := map[string]int64{}
	for _, r := range RoundTripTable(t, path, section) {
		if !r.Flat {
			m[r.Op] = r.Max
		}
	}
	return m
}
