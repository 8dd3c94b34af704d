package topoctl

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	goio "io"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
	"github.com/topokit/topokit/topo/copy"
)

func newGetCmd(stores *connector, out *printer) *cobra.Command {
	var (
		version   string
		decode    string
		protoset  string
		typ       string
		recursive bool
		rawPrefix bool
		keysOnly  bool
		hexOut    bool
		full      bool
	)
	cmd := &cobra.Command{
		Use:   "get FILE | get -R [--keys-only] DIR | get --prefix [--keys-only] PREFIX",
		Short: "Print a file's value (or every file's under a directory or prefix)",
		Long: `Print the value stored at FILE, byte for byte. On a terminal, a value that
is not text (control bytes such as a protobuf record's, or not UTF-8) is
shown quoted with escapes instead, its first 200 bytes only, with a note on
stderr; --full prints its bytes there too, and a pipe always gets them.
On a terminal a text value that does not end with a newline gets one, so
that the prompt starts a line of its own (a pipe or --full gets no added
byte).

get -R DIR prints every file under the directory DIR (its subtree:
DIR/..., as -R means in ls, rm and every other command; "/" is
everything); get --prefix PREFIX every file whose path starts with PREFIX,
a plain string prefix ("/keyspaces/c" matches "/keyspaces/commerce/...",
like "etcdctl get --prefix" or "consul kv get -recurse"). A lock's or an
election's entries are not files and are left out (on etcd and Consul
ls -R -l lists them and get ENTRY --decode shows one; on ZooKeeper ls -R
-l shows only an ephemeral "locks" directory). Each file's
path is on one line, then its value on the next (quoted, with
escapes, when it is not one line of printable text or starts with a
double quote, so a value line is quoted exactly when it starts with one;
on a terminal its
first 200 bytes only, unless --full). --keys-only prints
the paths only (and implies -R without --prefix). With --output json it prints one array of {"path",
"version","value" (base64)}. Files at reserved paths (written by another
tool) are named on stderr, with exit 1.

--version V reads the value the file held at version V (etcd keeps history
until it is compacted; memory keeps recent history; ZooKeeper and Consul keep
none and fail with NoImplementation).

--decode (bare, or --decode json) prints the value decoded as readable
JSON, its type chosen by the file's path: every record of Vitess's layout
is built in (Keyspace, Shard, VSchema, SrvKeyspace, SrvVSchema, Tablet,
ShardReplication, CellInfo, CellsAlias, RoutingRules, KeyspaceRoutingRules,
ShardRoutingRules, MirrorRules, ExternalVitessCluster; docs/vitess.md), and
a lock's, an election's or a metadata file is shown as the JSON or text it
holds; fields a record's type does not have (a newer Vitess's) are shown
under "@unknown". Any other file decodes as the one message named like its
base name. --protoset adds message types (a binary FileDescriptorSet, as
"protoc --include_imports --descriptor_set_out" writes; default
$` + envProtoset + `), and --type names the message (e.g. topodata.Tablet, or a
short name such as Tablet): bytes that do not parse as it, or hold fields it
does not have, are an error. --decode raw prints the value as a protobuf
wire dump without a schema. A bare --decode takes no value: "--decode json
PATH", "--decode raw PATH" and "--decode=json" keep their meaning.

With --output json it prints {"path","version","value" (base64),"decoded"}.

get -R --decode [raw|json] decodes every file's value the same way, each by
its own path ("get -R --decode /" prints every record decoded) (--type applies to one file only): each file's path on one
line, its decoded value below it. A value that does not decode is shown as
get -R shows values, with a note on stderr saying why (exit 0). With
--output json it prints one JSON document per file, one per line:
{"path","version","value","decoded"}, with "decode_error" in place of
"decoded" for a value that does not decode.`,
		Args: decodeArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if recursive && rawPrefix {
				return usagef("-R reads a directory's subtree, --prefix a plain string prefix: give one")
			}
			if recursive || keysOnly || rawPrefix {
				if cmd.Flags().Changed("version") || typ != "" {
					return usagef("get -R/--keys-only reads the current files: --version and --type apply to one file")
				}
				if keysOnly && (decode != "" || protoset != "") {
					return usagef("--keys-only prints no values: --decode and --protoset do not apply")
				}
				if hexOut && decode != "" {
					return usagef("--hex prints the stored bytes: it does not combine with --decode")
				}
				dec, err := newRecordDecoder(decode, protoset, stores.getenv)
				if err != nil {
					return err
				}
				prefix, err := subtreePrefix(args[0], rawPrefix)
				if err != nil {
					return err
				}
				return (&treeRun{stores: stores, out: out}).getPrefix(cmd.Context(), prefix, !rawPrefix, keysOnly, hexOut, full, dec)
			}
			p, err := topo.CleanFilePath(args[0])
			if err != nil {
				return err
			}
			if hexOut && decode != "" {
				return usagef("--hex prints the stored bytes: it does not combine with --decode")
			}
			var atVersion int64 = -1
			if cmd.Flags().Changed("version") {
				v, err := topo.ParseVersion(version)
				if err != nil {
					return usageError{fmt.Errorf("--version: %w", err)}
				}
				atVersion = int64(v)
			}
			var sch *schema
			// md is --type's message; nil decodes by the file's path.
			var md protoreflect.MessageDescriptor
			switch decode {
			case "", "none", "raw":
				if protoset != "" || typ != "" {
					return usagef("--protoset and --type need --decode json")
				}
			case "json":
				if protoset == "" {
					protoset = stores.getenv(envProtoset)
				}
				if sch, err = loadSchema(protoset); err != nil {
					return err
				}
				if md, err = messageType(sch, typ, p); err != nil {
					if typ != "" && protoset == "" {
						return usagef("--type %s: no such message is built into topoctl (Vitess's records are, docs/vitess.md): --protoset FILE (a FileDescriptorSet, as \"protoc --include_imports --descriptor_set_out\" writes) adds types", typ)
					}
					if protoset == "" {
						return usagef("--decode json: no message type is known for %s: every record of Vitess's layout is built in (docs/vitess.md); --protoset FILE (a FileDescriptorSet, as \"protoc --include_imports --descriptor_set_out\" writes) adds types, --type names one", displayPath(p))
					}
					return err
				}
				if typ == "" {
					// Decoded by the file's path (decodeByPath).
					md = nil
				}
			default:
				return usagef("--decode %q: want raw or json", decode)
			}

			st, ctx, done, err := stores.openCall(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var value []byte
			var ver string
			if atVersion >= 0 {
				value, err = st.conn.GetVersion(ctx, p, atVersion)
				if topo.IsErrType(err, topo.NoImplementation) {
					// The error's path is the file's, not an
					// implementation's name: show it as typed.
					var te *topo.Error
					if errors.As(err, &te) && te.Path == p {
						te.Path = displayPath(p)
					}
					return fmt.Errorf("%s keeps no history, so --version cannot be read: %w", st.name, err)
				}
				if topo.IsErrType(err, topo.NoNode) {
					if _, cur, gerr := st.conn.Get(ctx, p); gerr == nil {
						// The file exists: say what is missing once, not
						// after the backend's "node doesn't exist", whose
						// NoNode the error wraps.
						return &kindError{msg: fmt.Sprintf("%s: version %d of this file is not kept (never one of its versions, or compacted away); its current version is %s", displayPath(p), atVersion, cur), err: err}
					}
				}
				ver = topo.NumericVersion(atVersion).String()
			} else {
				var v topo.Version
				value, v, err = st.conn.Get(ctx, p)
				if err == nil {
					ver = v.String()
				}
			}
			if err != nil {
				return notADirectory(ctx, st.conn, p, err, "get -R %s prints every file under it")
			}

			var decoded any
			var text []byte
			switch decode {
			case "raw":
				fs, err := parseRaw(value, 0)
				if err != nil {
					return fmt.Errorf("%s: value is not protobuf wire format: %w", displayPath(p), err)
				}
				decoded, text = fs, []byte(formatRaw(fs))
			case "json":
				var b []byte
				if md != nil {
					b, err = decodeJSON(sch, md, value, !out.jsonOut())
				} else {
					b, err = decodeByPath(sch, p, value, !out.jsonOut())
				}
				if err != nil {
					return fmt.Errorf("%s: %w", displayPath(p), err)
				}
				decoded, text = json.RawMessage(b), append(b, '\n')
			default:
				text = value
				switch {
				case hexOut:
					text = []byte(hex.EncodeToString(value) + "\n")
				case !full && !out.jsonOut() && out.terminal() && !terminalText(value):
					text = []byte(cutQuoted(value) + "\n")
					out.eprintf("note: %s is not text: shown quoted on a terminal (%s); --full or a pipe prints its bytes as they are, --hex and --decode raw|json show them\n",
						displayPath(p), plural(len(value), "byte"))
				case !full && !out.jsonOut() && out.terminal() && len(value) > 0 && value[len(value)-1] != '\n':
					// On a terminal the prompt would follow the value on
					// its line; a pipe gets the bytes as they are.
					text = append(slices.Clip(value), '\n')
				}
			}
			if out.jsonOut() {
				return out.printJSON(struct {
					Path    string      `json:"path"`
					Version jsonVersion `json:"version"`
					Value   []byte      `json:"value"`
					Decoded any         `json:"decoded,omitempty"`
				}{displayPath(p), jsonVersion(ver), nonNil(value), decoded})
			}
			err = out.write(text)
			return err
		},
		Example: `  topoctl get --decode /keyspaces/commerce/Keyspace
  topoctl get -R --decode /
  topoctl get /tablets/zone1-0000000100/Tablet --decode json --protoset vitess-topodata.protoset --type topodata.Tablet
  topoctl get -R /keyspaces/commerce
  topoctl get --prefix --keys-only /keyspaces/comm
  topoctl get -R --decode json /cells/
  topoctl get -R --keys-only /tablets/`,
	}
	f := cmd.Flags()
	f.StringVar(&version, "version", "", "read the value the file held at this version")
	f.StringVar(&decode, "decode", "", "decode the value: json (bare --decode: readable JSON, the type chosen by the path; --protoset/--type add or name types) or raw (protobuf wire dump)")
	f.Lookup("decode").NoOptDefVal = decodeDefault
	f.StringVar(&protoset, "protoset", "", "FileDescriptorSet file adding message types for --decode json")
	f.StringVar(&typ, "type", "", "protobuf message name for --decode json, e.g. topodata.Tablet or Tablet")
	f.BoolVarP(&recursive, "recursive", "R", false, "print every file under the directory DIR (its subtree: DIR/...), as ls -R, rm -R and copy take a directory")
	f.BoolVar(&rawPrefix, "prefix", false, "print every file whose path starts with PREFIX, a plain string prefix (\"/keyspaces/c\" matches \"/keyspaces/commerce/...\"), like etcdctl get --prefix")
	f.BoolVar(&keysOnly, "keys-only", false, "with -R (implied without --prefix) or --prefix, print the paths only")
	f.BoolVar(&hexOut, "hex", false, "print values as hexadecimal (one line each), like etcdctl --hex")
	f.BoolVar(&full, "full", false, "on a terminal too, print a value that is not text as it is (get FILE) or whole (get -R)")
	return cmd
}

func newPutCmd(stores *connector, in *input, out *printer) *cobra.Command {
	var (
		create    bool
		ifVersion string
		file      string
	)
	cmd := &cobra.Command{
		Use: "put FILE [VALUE | -]",
		Example: `  topoctl put /RoutingRules --file rules.pb
  echo -n value | topoctl put /a/b
  topoctl put --if-version 42 /a/b new-value`,
		Short: "Write a file",
		Long: `Write a value to FILE, byte for byte, taken from the VALUE argument, from
--file F, or from standard input: when it is a pipe or a file (not a
terminal) and neither VALUE nor --file is given, or when VALUE or F is "-".
On a terminal with no value given, put fails with a usage error rather than
wait for typing. By default the write is
unconditional and creates the file if it is absent. --create fails with
NodeExists if the file exists; --if-version V writes only if the file's
version is V (BadVersion otherwise, NoNode if absent). The path, value size
(at most 512 KiB) and version are checked before anything is written. It
prints the new version.`,
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := topo.CleanFilePath(args[0])
			if err != nil {
				return err
			}
			var cas topo.Version
			if cmd.Flags().Changed("if-version") {
				if create {
					return usagef("--create and --if-version exclude each other")
				}
				v, err := topo.ParseVersion(ifVersion)
				if err != nil {
					return usageError{fmt.Errorf("--if-version: %w", err)}
				}
				cas = v
			}
			var value []byte
			readStdin := func() error {
				if value, err = goio.ReadAll(goio.LimitReader(in.stdin, topo.MaxValueSize+1)); err != nil {
					return stdinError(err)
				}
				if len(value) > topo.MaxValueSize {
					// Only MaxValueSize+1 bytes were read: the real size
					// is unknown (a pipe may never end).
					return backendkit.Wrap(topo.InvalidArgument, displayPath(p), fmt.Errorf("standard input holds more than the %d bytes (%d KiB) a file may hold; nothing was written", topo.MaxValueSize, topo.MaxValueSize/1024))
				}
				return nil
			}
			switch {
			case len(args) == 2 && file != "":
				return usagef("give the value as an argument or with --file, not both")
			case len(args) == 2 && args[1] == "-", file == "-":
				if err := readStdin(); err != nil {
					return err
				}
			case len(args) == 2:
				value = []byte(args[1])
			case file != "":
				var size int64
				if value, size, err = readBounded(file, topo.MaxValueSize); err != nil {
					return usageError{fmt.Errorf("--file: %w", err)}
				}
				if len(value) > topo.MaxValueSize {
					if size < 0 {
						return backendkit.Wrap(topo.InvalidArgument, displayPath(p), fmt.Errorf("%s holds more than the %d bytes (%d KiB) a file may hold; nothing was written", file, topo.MaxValueSize, topo.MaxValueSize/1024))
					}
					return backendkit.Wrap(topo.InvalidArgument, displayPath(p), fmt.Errorf("value is %d bytes, more than the %d bytes (%d KiB) a file may hold", size, topo.MaxValueSize, topo.MaxValueSize/1024))
				}
			case in.terminal():
				return usagef("no value given: pass it as an argument (put %s VALUE), with --file F, or on standard input with \"-\" (put %s -) or through a pipe", args[0], args[0])
			default:
				if err := readStdin(); err != nil {
					return err
				}
			}
			if err := copy.CheckValue(p, value); err != nil {
				return err
			}

			st, ctx, done, err := stores.openCall(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			var v topo.Version
			if create {
				v, err = st.conn.Create(ctx, p, value)
			} else {
				v, err = st.conn.Update(ctx, p, value, cas)
			}
			if err != nil {
				return err
			}
			if out.jsonOut() {
				return out.printJSON(map[string]any{"path": displayPath(p), "version": jsonVersion(v.String())})
			}
			out.printf("%s\n", v)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&create, "create", false, "fail with NodeExists if the file exists")
	f.StringVar(&ifVersion, "if-version", "", "write only if the file's current version is this one")
	f.StringVarP(&file, "file", "f", "", "read the value from this file (\"-\": standard input)")
	return cmd
}

func newRmCmd(stores *connector, out *printer) *cobra.Command {
	var run *treeRun
	var (
		ifVersion string
		recursive bool
		force     bool
	)
	cmd := &cobra.Command{
		Use:   "rm FILE | rm -R --force DIR",
		Short: "Delete a file, or every file under a directory",
		Long: `Delete FILE; --if-version V deletes it only if its version is V
(BadVersion otherwise). rm -R DIR deletes every file under DIR (and DIR
itself if it is a file); it needs --force, and prints how many files it
deleted to standard error (JSON on stdout with --output json); DIR "/" is
the whole root, and an empty DIR (an unset "$DIR") is a usage error. Deletes run
--parallel requests at a time, --batch (32) deletes per transaction (a
batch the store refuses, e.g. because a file is already gone, is deleted
one file at a time); on Ctrl-C no new delete starts (exit 130). Lock and
election entries are not files and are left alone. Files at reserved
paths (written by another tool) cannot be deleted by topokit: each is
named on stderr and rm -R exits 1.`,
		Example: `  topoctl rm /keyspaces/old/Keyspace
  topoctl rm --if-version 42 /RoutingRules
  topoctl rm -R --force /keyspaces/old`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if recursive {
				if cmd.Flags().Changed("if-version") {
					return usagef("--if-version applies to one file, not to rm -R")
				}
				if args[0] == "" {
					// Most likely an unset variable ("$DIR"), not the root.
					return usagef("rm -R got an empty DIR: to delete every file under the root, say so: rm -R --force /")
				}
				if !force {
					return usagef("rm -R %s deletes every file under it: add --force to confirm", args[0])
				}
				dir, err := topo.CleanDirPath(args[0])
				if err != nil {
					return err
				}
				st, err := stores.open(cmd.Context())
				if err != nil {
					return err
				}
				defer st.Close()
				return run.removeTree(cmd.Context(), st, dir)
			}
			p, err := topo.CleanFilePath(args[0])
			if err != nil {
				return err
			}
			var cas topo.Version
			if cmd.Flags().Changed("if-version") {
				v, err := topo.ParseVersion(ifVersion)
				if err != nil {
					return usageError{fmt.Errorf("--if-version: %w", err)}
				}
				cas = v
			}
			st, ctx, done, err := stores.openCall(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if err := st.conn.Delete(ctx, p, cas); err != nil {
				return notADirectory(ctx, st.conn, p, err, "rm -R --force %s deletes every file under it")
			}
			if out.jsonOut() {
				return out.printJSON(map[string]any{"path": displayPath(p), "deleted": 1})
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&ifVersion, "if-version", "", "delete only if the file's current version is this one")
	f.BoolVarP(&recursive, "recursive", "R", false, "delete every file under DIR")
	f.BoolVar(&force, "force", false, "confirm rm -R")
	run = newTreeRun(cmd, stores, out)
	return cmd
}

// removeTree is rm -R: it deletes every file at or under dir.
func (o *treeRun) removeTree(ctx context.Context, st *store, dir string) error {
	tl, err := o.list(ctx, st.conn, dir)
	if err != nil {
		return err
	}
	eo := o.execOptions(len(tl.Files), "deleting")
	eo.Interrupted = nil
	deleted, err := copy.DeleteTree(ctx, st.conn, tl.Files, eo)
	var de *copy.DeleteError
	switch {
	case errors.As(err, &de) && de.Interrupted:
		return exitError{code: ExitInterrupted, err: fmt.Errorf("rm -R interrupted: deleted %d of %s under %s", deleted, plural(len(tl.Files), "file"), displayPath(dir))}
	case errors.As(err, &de):
		return fmt.Errorf("deleted %d of %s under %s: %w", deleted, plural(len(tl.Files), "file"), displayPath(dir), de.Err)
	case err != nil:
		return err
	}
	if o.out.jsonOut() {
		if err := o.out.printJSON(map[string]any{"path": displayPath(dir), "deleted": deleted, "reserved": displayPaths(tl.Reserved)}); err != nil {
			return err
		}
	} else {
		o.out.eprintf("deleted %s under %s\n", plural(deleted, "file"), displayPath(dir))
	}
	if len(tl.Files) == 0 && !tl.Skipped() {
		o.out.eprintf("note: there were no files under %s in %s\n", displayPath(dir), st.name)
	}
	return o.reportSkipped("deleted", st.name, dir, tl)
}

// displayPaths renders canonical paths as displayPath does; never nil.
func displayPaths(ps []string) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = displayPath(p)
	}
	return out
}

// notADirectory turns the NoNode error of a file operation on p into one
// that says p is a directory, when it is one, and what to run instead:
// ls, and the command's own form for a directory, hint, whose %s is p
// (get: "get -R %s prints ..."; rm: "rm -R --force %s deletes ...").
// Other errors pass unchanged.
func notADirectory(ctx context.Context, conn topo.Conn, p string, err error, hint string) error {
	if !topo.IsErrType(err, topo.NoNode) {
		return err
	}
	if des, lerr := conn.ListDir(ctx, p, false); lerr == nil && len(des) > 0 {
		return &kindError{
			msg: fmt.Sprintf("%s is a directory, not a file (ls %s lists it; %s)", displayPath(p), displayPath(p), fmt.Sprintf(hint, displayPath(p))),
			err: err,
		}
	}
	return err
}

// kindError is an error about what a path is (a directory where a file was
// wanted, or the reverse), whose message says that first; it wraps the
// backend's error (NoNode, or InvalidArgument for lock on a file), which
// gives the error code.
type kindError struct {
	msg string
	err error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.err }

// getPrefix is get -R (subtree) and --prefix: every file whose path
// starts with prefix (canonical, see subtreePrefix), each value decoded by
// dec when it is not nil.
func (o *treeRun) getPrefix(ctx context.Context, prefix string, subtree, keysOnly, hexOut, full bool, dec *recordDecoder) error {
	st, cctx, done, err := o.stores.openCall(ctx)
	if err != nil {
		return err
	}
	defer done()
	kvs, err := st.conn.List(cctx, prefix)
	var rf *topo.ReservedFilesError
	var reserved []string
	switch {
	case err == nil:
	case errors.As(err, &rf):
		reserved = rf.Paths
	case topo.IsErrType(err, topo.NoNode) && subtree:
		o.out.eprintf("note: no file under %s in %s (a lock's or an election's entries are not files: ls -R -l lists them (on ZooKeeper only their \"locks\" directory), and on etcd and Consul get ENTRY reads one)\n", displayPath(strings.TrimSuffix(prefix, "/")), st.name)
	case topo.IsErrType(err, topo.NoNode):
		o.out.eprintf("note: no file under the prefix %s in %s\n", displayPath(prefix), st.name)
	default:
		return at(err, prefix)
	}
	type item struct {
		Path    string      `json:"path"`
		Version jsonVersion `json:"version"`
		Value   []byte      `json:"value"`
	}
	items := []item{}
	keys := []struct {
		Path string `json:"path"`
	}{}
	for _, kv := range kvs {
		if topo.IsReserved(kv.Path) {
			reserved = append(reserved, kv.Path)
			continue
		}
		items = append(items, item{displayPath(kv.Path), jsonVersion(kv.Version.String()), nonNil(kv.Value)})
		keys = append(keys, struct {
			Path string `json:"path"`
		}{displayPath(kv.Path)})
	}
	switch {
	case dec != nil:
		for _, it := range items {
			if err := o.printDecoded(dec, it.Path, it.Version, it.Value, full); err != nil {
				return err
			}
		}
	case o.out.jsonOut() && keysOnly:
		if err := o.out.printJSON(keys); err != nil {
			return err
		}
	case o.out.jsonOut():
		if err := o.out.printJSON(items); err != nil {
			return err
		}
	default:
		for _, it := range items {
			o.out.printf("%s\n", it.Path)
			switch {
			case keysOnly:
			case hexOut:
				o.out.printf("%s\n", hex.EncodeToString(it.Value))
			case !full && o.out.terminal() && !plainLine(it.Value):
				o.out.printf("%s\n", cutQuoted(it.Value))
			default:
				o.out.printf("%s\n", showValue(it.Value))
			}
		}
	}
	slices.Sort(reserved)
	return o.reportReserved("listed", st.name, prefix, reserved)
}

// printDecoded prints one record of get -R --decode: with --output json
// one JSON document {"path","version","value","decoded"} (as get FILE
// --decode prints it; "decode_error" instead of "decoded" when the value
// does not decode), else its path on one line and its decoded value
// below it, or, when it does not decode, its value as get -R shows it and
// a note on stderr saying why.
func (o *treeRun) printDecoded(dec *recordDecoder, path string, version jsonVersion, value []byte, full bool) error {
	decoded, text, err := dec.decode(strings.TrimPrefix(path, "/"), value, !o.out.jsonOut())
	if o.out.jsonOut() {
		return o.out.printJSON(struct {
			Path    string      `json:"path"`
			Version jsonVersion `json:"version"`
			Value   []byte      `json:"value"`
			decodedJSON
		}{path, version, nonNil(value), decodedMembers(decoded, err)})
	}
	o.out.printf("%s\n", path)
	if err == nil {
		o.out.printf("%s", text)
		return nil
	}
	o.out.eprintf("note: %s not decoded: %s\n", path, escapeControl(err.Error()))
	if !full && o.out.terminal() && !plainLine(value) {
		o.out.printf("%s\n", cutQuoted(value))
	} else {
		o.out.printf("%s\n", showValue(value))
	}
	return nil
}

// terminalValueLimit is how many bytes of a value that is not text get
// shows on a terminal without --full.
const terminalValueLimit = 200

// terminalText reports whether b can go to a terminal as it is: UTF-8 text
// of printable characters, newlines and tabs (no escape sequences or other
// control bytes).
func terminalText(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if r != '\n' && r != '\t' && !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// cutQuoted renders b quoted with escapes, its first terminalValueLimit
// bytes only, then " ... (N bytes)" when it is longer.
func cutQuoted(b []byte) string {
	if len(b) <= terminalValueLimit {
		return strconv.Quote(string(b))
	}
	return strconv.Quote(string(b[:terminalValueLimit])) + " ... (" + plural(len(b), "byte") + ")"
}

// showValue renders a value for a line of output: as is when plainLine,
// quoted with escapes otherwise.
func showValue(b []byte) string {
	if plainLine(b) {
		return string(b)
	}
	return strconv.Quote(string(b))
}

// plainLine reports whether a value can be shown on its line as it is:
// one line of printable UTF-8 text that does not start with a double
// quote (which would read as a quoted value: a reader unquotes a line
// exactly when it starts with one).
func plainLine(b []byte) bool {
	return printable(b) && !strings.ContainsAny(string(b), "\n\r") && !strings.HasPrefix(string(b), `"`)
}

// readBounded reads the file at path, at most limit+1 bytes of it, so
// that an endless file (/dev/zero, a FIFO fed forever) cannot take every
// byte of memory: a result longer than limit means the file holds more.
// size is the file's size when it is a regular file, else -1.
func readBounded(path string, limit int) (b []byte, size int64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, -1, err
	}
	defer f.Close()
	size = -1
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	b, err = goio.ReadAll(goio.LimitReader(f, int64(limit)+1))
	return b, size, err
}
