package decode

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// Text renders the value of a file that holds text, such as a lock's or an
// election's (Vitess writes a lock holder's description as JSON, and a
// participant id or a leader's value as plain text), as JSON: a value that
// is a JSON document as that document (indented by two spaces when
// multiline, compact otherwise), any other UTF-8 text as a JSON string,
// and bytes that are not UTF-8 as a JSON string of the bytes with each
// byte outside printable ASCII, and each quote and backslash, written \xNN
// (as FormatRaw quotes bytes).
// An empty value is "". It never fails on any value; the error is for
// symmetry with Decode.
func Text(value []byte, multiline bool) ([]byte, error) {
	if len(value) > 0 && json.Valid(value) {
		var out bytes.Buffer
		if err := json.Compact(&out, value); err != nil {
			return nil, err
		}
		return layoutJSON(out.Bytes(), multiline)
	}
	s := string(value)
	if !utf8.Valid(value) {
		q := quoteBytes(value)
		s = q[1 : len(q)-1]
	}
	return json.Marshal(s)
}
