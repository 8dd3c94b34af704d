package topoctl

// The output layer: every command formats its results through one
// printer (text or --output json on stdout, notes and the progress bar on
// stderr, the error line and the exit code when the command ends; see
// exit.go for the codes). Commands never write to the streams themselves.

import (
	"encoding/json"
	"fmt"
	goio "io"
	"log/slog"
	"os"
	"strconv"
	"text/tabwriter"

	"golang.org/x/term"
)

// printer is where a command tree's output goes, and in which format. One
// is created per command tree; its format and log are set once the flags
// are resolved. It is safe for concurrent use when its writers are (see
// newRoot's lockedWriter).
type printer struct {
	stdout, stderr goio.Writer
	// format is --output: "text" or "json".
	format string
	// stdoutIsTerminal is streams.StdoutIsTerminal.
	stdoutIsTerminal func() bool
	// log is topoctl's logger (stderr, at --log-level); it discards until
	// the flags are resolved.
	log *slog.Logger
	// logLevelGiven reports whether --log-level was given (serve's cluster
	// node then logs at that level; without it, at warn).
	logLevelGiven bool
	// stores names the stores opened, for the connection errors' lines
	// (see errorLine).
	stores []string
}

// newPrinter returns the printer of streams io, in text until the flags
// say otherwise.
func newPrinter(io streams) *printer {
	return &printer{stdout: io.Stdout, stderr: io.Stderr, format: "text", stdoutIsTerminal: io.StdoutIsTerminal,
		log: slog.New(slog.DiscardHandler)}
}

// jsonOut reports whether --output json was asked for.
func (p *printer) jsonOut() bool { return p.format == "json" }

// printJSON writes v as one line of JSON to stdout.
func (p *printer) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.stdout, "%s\n", b)
	return err
}

// printf writes to stdout.
func (p *printer) printf(format string, args ...any) {
	fmt.Fprintf(p.stdout, format, args...)
}

// write writes b to stdout as it is (a value get prints raw).
func (p *printer) write(b []byte) error {
	_, err := p.stdout.Write(b)
	return err
}

// eprintf writes to stderr (notes and summaries that are not the output).
func (p *printer) eprintf(format string, args ...any) {
	fmt.Fprintf(p.stderr, format, args...)
}

// table returns a writer of aligned columns on stdout; Flush it at the
// end.
func (p *printer) table() *tabwriter.Writer {
	return tabwriter.NewWriter(p.stdout, 0, 4, 2, ' ', 0)
}

// terminal reports whether stdout is a terminal (get quotes values that
// are not text, tree commands draw a progress bar; see
// streams.StdoutIsTerminal).
func (p *printer) terminal() bool {
	if p.stdoutIsTerminal != nil {
		return p.stdoutIsTerminal()
	}
	f, ok := p.stdout.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// named records a store's name for the error lines of connection errors;
// rename replaces the last one recorded (a cell's store once known).
func (p *printer) named(store string) { p.stores = append(p.stores, store) }

// rename replaces the store name recorded last by named.
func (p *printer) rename(store string) { p.stores[len(p.stores)-1] = store }

// jsonVersion is a file version in JSON output: a number, as every
// bundled backend's versions are (topo.NumericVersion), or a string for a
// backend whose versions are not decimal numbers. Its empty value (no
// version: a directory) is left out with omitempty.
type jsonVersion string

// MarshalJSON writes v as a number when it is a decimal number.
func (v jsonVersion) MarshalJSON() ([]byte, error) {
	if _, err := strconv.ParseInt(string(v), 10, 64); err == nil {
		return []byte(v), nil
	}
	return json.Marshal(string(v))
}

// UnmarshalJSON reads a number or a string.
func (v *jsonVersion) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = jsonVersion(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*v = jsonVersion(n.String())
	return nil
}

// nonNil returns b, or an empty slice for nil, so that JSON shows an empty
// value as "" (base64 of nothing) rather than null.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// plural returns "1 file", "2 files": n and noun, with an "s" unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
