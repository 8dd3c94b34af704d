package topoctl

import (
	"encoding/json"
	"fmt"
)

// jsonOut reports whether --output json was asked for.
func (o *options) jsonOut() bool { return o.output == "json" }

// printJSON writes v as one line of JSON to stdout.
func (o *options) printJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(o.io.Stdout, "%s\n", b)
	return err
}

// printf writes to stdout.
func (o *options) printf(format string, args ...any) {
	fmt.Fprintf(o.io.Stdout, format, args...)
}

// eprintf writes to stderr (notes and summaries that are not the output).
func (o *options) eprintf(format string, args ...any) {
	fmt.Fprintf(o.io.Stderr, format, args...)
}

// plural returns "1 file", "2 files": n and noun, with an "s" unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
