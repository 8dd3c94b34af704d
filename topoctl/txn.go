package topoctl

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	goio "io"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/copy"
)

// maxTxnInput bounds what txn reads: a transaction's contents are at most
// MaxValueSize per write, and a store takes a bounded number of ops.
const maxTxnInput = 64 << 20

// txnInputOp is one operation of txn's JSON input.
type txnInputOp struct {
	Op          string  `json:"op"`
	Path        string  `json:"path"`
	Version     *int64  `json:"version"`
	Value       *string `json:"value"`
	ValueBase64 *string `json:"value_base64"`
}

// txnOp is one parsed operation: the topo op and how to name it.
type txnOp struct {
	op   topo.TxnOp
	path string // as displayed, "/a/b"
}

func newTxnCmd(stores *connector, in *input, out *printer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "txn [FILE | -]",
		Short: "Apply a transaction: conditions and writes, all or nothing, in one store call",
		Long: `Read a transaction from FILE (or standard input: "-", or no FILE when it is
not a terminal) and apply it with one Conn.Txn call: every condition holds
and every write is applied, atomically, or nothing is written.

The input is either a JSON array of operations:

  [{"op": "if-version", "path": "/a", "version": 7},
   {"op": "if-absent",  "path": "/b"},
   {"op": "if-present", "path": "/c"},
   {"op": "create",     "path": "/b", "value": "text"},
   {"op": "update",     "path": "/a", "value_base64": "AAE=", "version": 7},
   {"op": "delete",     "path": "/c"}]

("value" is text, "value_base64" binary bytes in base64; "version" is
optional on update and delete, where it makes the write conditional on the
file's version), or lines in the manner of etcdctl txn, one operation
each ('#' starts a comment; a value or path with spaces is double-quoted,
with Go escapes such as \n and \x00):

  if-version /a 7
  if-absent /b
  if-present /c
  create /b text
  update /a "two words" 7       # "put" is update
  delete /c                     # "del" is delete; an optional VERSION follows

It prints the new version of each create and update, "PATH VERSION" per
line (with --output json: {"ops":[{"index","op","path","version"}...]}, the
version on writes only). When a condition does not hold (including a
create of an existing file, or an update or delete whose version does not
match), nothing is written and topoctl exits 1 naming the failing
operation's index (from 0) and why (NodeExists, NoNode, BadVersion). A
malformed operation (a bad or reserved path, a bad version, a value over
512 KiB, a path written twice) is a usage error (exit 2) found before
anything is sent.
Unavailable means the outcome is unknown: the store may have applied it.`,
		Example: `  echo 'if-version /RoutingRules 7
  update /RoutingRules new-rules 7
  create /RoutingRules.bak old-rules' | topoctl txn
  topoctl txn ops.json`,
		Args: rangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var text []byte
			var err error
			switch {
			case len(args) == 1 && args[0] != "-":
				if text, _, err = readBounded(args[0], maxTxnInput); err != nil {
					return usageError{err}
				}
			case len(args) == 0 && in.terminal():
				return usagef("txn reads the transaction from FILE or standard input: give a FILE, \"-\", or a pipe")
			default:
				if text, err = goio.ReadAll(goio.LimitReader(in.stdin, maxTxnInput+1)); err != nil {
					return stdinError(err)
				}
			}
			if len(text) > maxTxnInput {
				return usagef("the transaction is larger than %d bytes", maxTxnInput)
			}
			ops, err := parseTxn(text)
			if err != nil {
				return err
			}
			tops := make([]topo.TxnOp, len(ops))
			for i, op := range ops {
				tops[i] = op.op
			}
			// The store's own checks, before anything is sent: reserved
			// paths, a path written twice.
			if _, err := backendkit.CheckTxn(context.Background(), tops); err != nil {
				var te *topo.TxnError
				if errors.As(err, &te) && te.Index < len(ops) {
					return usagef("transaction op %d (%s %s) is malformed: %v", te.Index, te.Kind, ops[te.Index].path, te.Err)
				}
				return usageError{err}
			}
			st, ctx, done, err := stores.openCall(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			vs, err := st.conn.Txn(ctx, tops...)
			if err != nil {
				return txnFailure(err, ops, st.name)
			}
			return printTxn(out, ops, vs)
		},
	}
	return cmd
}

// printTxn prints the new versions of the writes of ops.
func printTxn(out *printer, ops []txnOp, vs []topo.Version) error {
	type result struct {
		Index   int         `json:"index"`
		Op      string      `json:"op"`
		Path    string      `json:"path"`
		Version jsonVersion `json:"version,omitempty"`
	}
	rs := make([]result, len(ops))
	for i, op := range ops {
		rs[i] = result{Index: i, Op: op.op.Kind.String(), Path: op.path}
		if i < len(vs) && vs[i] != nil {
			rs[i].Version = jsonVersion(vs[i].String())
		}
	}
	if out.jsonOut() {
		return out.printJSON(map[string]any{"ops": rs})
	}
	for _, r := range rs {
		if r.Version != "" {
			out.printf("%s %s\n", r.Path, r.Version)
		}
	}
	return nil
}

// txnFailure explains the error of a transaction: which op failed and why,
// that nothing was written, or that the outcome is unknown.
func txnFailure(err error, ops []txnOp, store string) error {
	var te *topo.TxnError
	if errors.As(err, &te) {
		what := te.Kind.String()
		if te.Index >= 0 && te.Index < len(ops) && ops[te.Index].path != "" {
			what += " " + ops[te.Index].path
		}
		return fmt.Errorf("transaction op %d (%s) failed, nothing was written: %w", te.Index, what, te.Err)
	}
	switch topo.CodeOf(err) {
	case topo.Unavailable, topo.Timeout:
		return fmt.Errorf("the outcome of the transaction is unknown (the store may have applied it): %w", err)
	case topo.NoImplementation:
		return fmt.Errorf("%s does not implement transactions: %w", store, err)
	}
	return err
}

// parseTxn parses txn's input: a JSON array when it starts with "[", else
// lines. Every op is checked (path, version, value size) before anything
// is sent; errors are usage errors naming the op.
func parseTxn(in []byte) ([]txnOp, error) {
	var ops []txnOp
	var err error
	if t := bytes.TrimLeftFunc(in, unicode.IsSpace); len(t) > 0 && t[0] == '[' {
		ops, err = parseTxnJSON(t)
	} else {
		ops, err = parseTxnLines(string(in))
	}
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, usagef("the transaction has no operations")
	}
	return ops, nil
}

func parseTxnJSON(in []byte) ([]txnOp, error) {
	dec := json.NewDecoder(bytes.NewReader(in))
	dec.DisallowUnknownFields()
	var raw []txnInputOp
	if err := dec.Decode(&raw); err != nil {
		return nil, usagef("transaction JSON: %v (want an array of {\"op\",\"path\",\"version\",\"value\" or \"value_base64\"})", err)
	}
	if dec.More() {
		return nil, usagef("transaction JSON: more than one value: give one array of operations")
	}
	ops := make([]txnOp, len(raw))
	for i, r := range raw {
		where := fmt.Sprintf("op %d", i)
		var value []byte
		hasValue := r.Value != nil || r.ValueBase64 != nil
		switch {
		case r.Value != nil && r.ValueBase64 != nil:
			return nil, usagef("%s: give \"value\" or \"value_base64\", not both", where)
		case r.Value != nil:
			value = []byte(*r.Value)
		case r.ValueBase64 != nil:
			b, err := base64.StdEncoding.DecodeString(*r.ValueBase64)
			if err != nil {
				return nil, usagef("%s: value_base64: %v", where, err)
			}
			value = b
		}
		var version *string
		if r.Version != nil {
			v := strconv.FormatInt(*r.Version, 10)
			version = &v
		}
		op, err := buildTxnOp(where, r.Op, r.Path, value, hasValue, version)
		if err != nil {
			return nil, err
		}
		ops[i] = op
	}
	return ops, nil
}

func parseTxnLines(in string) ([]txnOp, error) {
	var ops []txnOp
	n := 0
	for line := range strings.Lines(in) {
		n++
		fields, err := splitTxnLine(line)
		if err != nil {
			return nil, usagef("line %d: %v", n, err)
		}
		if len(fields) == 0 {
			continue
		}
		where := fmt.Sprintf("line %d (op %d)", n, len(ops))
		kind, rest := fields[0], fields[1:]
		var path string
		if len(rest) > 0 {
			path, rest = rest[0], rest[1:]
		}
		var value []byte
		hasValue := false
		var version *string
		switch kind {
		case "create", "update", "put":
			if len(rest) > 0 {
				value, hasValue, rest = []byte(rest[0]), true, rest[1:]
			}
			if len(rest) > 0 && kind != "create" {
				version, rest = &rest[0], rest[1:]
			}
		case "if-version", "delete", "del":
			if len(rest) > 0 {
				version, rest = &rest[0], rest[1:]
			}
		}
		if len(rest) > 0 {
			return nil, usagef("%s: too many fields after %q (quote a value with spaces)", where, kind)
		}
		op, err := buildTxnOp(where, kind, path, value, hasValue, version)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// splitTxnLine splits a line into fields at blanks; a field may be
// double-quoted (Go escapes), and '#' outside quotes starts a comment.
func splitTxnLine(line string) ([]string, error) {
	var fields []string
	s := strings.TrimSpace(line)
	for s != "" {
		switch {
		case s[0] == '#':
			return fields, nil
		case s[0] == '"':
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, fmt.Errorf("bad quoted field %s", s)
			}
			f, _ := strconv.Unquote(q)
			fields = append(fields, f)
			s = s[len(q):]
			if s != "" && !unicode.IsSpace(rune(s[0])) {
				return nil, fmt.Errorf("a quoted field must be followed by a blank: %s", s)
			}
		default:
			end := strings.IndexFunc(s, unicode.IsSpace)
			if end < 0 {
				end = len(s)
			}
			fields = append(fields, s[:end])
			s = s[end:]
		}
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	return fields, nil
}

// buildTxnOp checks one operation and returns it. where names it in
// errors (usage errors).
func buildTxnOp(where, kind, path string, value []byte, hasValue bool, version *string) (txnOp, error) {
	switch kind {
	case "if-version", "if-absent", "if-present", "create", "update", "put", "delete", "del":
	case "":
		return txnOp{}, usagef("%s: no \"op\"", where)
	default:
		return txnOp{}, usagef("%s: unknown op %q: want if-version, if-absent, if-present, create, update (put) or delete (del)", where, kind)
	}
	if path == "" {
		return txnOp{}, usagef("%s: %q needs a path", where, kind)
	}
	p, err := topo.CleanFilePath(path)
	if err != nil {
		return txnOp{}, usageError{fmt.Errorf("%s: %w", where, err)}
	}
	var v topo.Version
	if version != nil {
		nv, err := topo.ParseVersion(*version)
		if err != nil {
			return txnOp{}, usageError{fmt.Errorf("%s: version: %w", where, err)}
		}
		v = nv
	}
	needValue := func() error {
		if !hasValue {
			return usagef("%s: %q needs a value", where, kind)
		}
		if err := copy.CheckValue(p, value); err != nil {
			return usageError{fmt.Errorf("%s: %w", where, err)}
		}
		return nil
	}
	noValue := func() error {
		if hasValue {
			return usagef("%s: %q takes no value", where, kind)
		}
		return nil
	}
	var op topo.TxnOp
	switch kind {
	case "if-version":
		if err := noValue(); err != nil {
			return txnOp{}, err
		}
		if v == nil {
			return txnOp{}, usagef("%s: if-version needs a version", where)
		}
		op = topo.IfVersion(p, v)
	case "if-absent", "if-present":
		if err := noValue(); err != nil {
			return txnOp{}, err
		}
		if v != nil {
			return txnOp{}, usagef("%s: %s takes no version", where, kind)
		}
		if kind == "if-absent" {
			op = topo.IfAbsent(p)
		} else {
			op = topo.IfPresent(p)
		}
	case "create":
		if err := needValue(); err != nil {
			return txnOp{}, err
		}
		if v != nil {
			return txnOp{}, usagef("%s: create takes no version (it requires the file to be absent)", where)
		}
		op = topo.CreateOp(p, value)
	case "update", "put":
		if err := needValue(); err != nil {
			return txnOp{}, err
		}
		op = topo.UpdateOp(p, value, v)
	case "delete", "del":
		if err := noValue(); err != nil {
			return txnOp{}, err
		}
		op = topo.DeleteOp(p, v)
	}
	return txnOp{op: op, path: displayPath(p)}, nil
}
