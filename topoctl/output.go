package topoctl

import (
	"encoding/json"
	"fmt"
	"strconv"
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
