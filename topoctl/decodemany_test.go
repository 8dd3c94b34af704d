package topoctl

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/topokit/topokit/proto/topodatapb"
)

// putCellInfo writes a CellInfo record for cell with root.
func putCellInfo(t *testing.T, tg target, cell, root string) {
	t.Helper()
	b, err := proto.Marshal(&topodatapb.CellInfo{ServerAddress: "127.0.0.1:2379", Root: root})
	require.NoError(t, err)
	f := filepath.Join(t.TempDir(), "ci")
	require.NoError(t, os.WriteFile(f, b, 0o600))
	tg.ok(t, "put", "cells/"+cell+"/CellInfo", "--file", f)
}

// decodedDoc is one record of get -R --decode -o json, or one change of
// watch --decode -o json.
type decodedDoc struct {
	Path        string
	Value       []byte
	Decoded     map[string]string
	DecodeError string `json:"decode_error"`
}

// jsonLines parses one JSON document per line.
func jsonLines(t *testing.T, out string) []decodedDoc {
	t.Helper()
	var docs []decodedDoc
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var d decodedDoc
		require.NoError(t, json.Unmarshal([]byte(l), &d), l)
		docs = append(docs, d)
	}
	return docs
}

// get -R --decode decodes every record by its own path: readable text, or
// one JSON document per record with -o json; a record that does not
// decode is shown as it is, with a note saying why.
func TestGetRecursiveDecode(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	putCellInfo(t, tg, "zone1", "/vitess/zone1")
	putCellInfo(t, tg, "zone2", "/vitess/zone2")
	tg.ok(t, "put", "cells/notes", "plain text")

	r := tg.run(t, "", "get", "-R", "--decode", "json", "cells/")
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "/cells/notes\nplain text\n"+
		"/cells/zone1/CellInfo\n{\n  \"serverAddress\": \"127.0.0.1:2379\",\n  \"root\": \"/vitess/zone1\"\n}\n"+
		"/cells/zone2/CellInfo\n{\n  \"serverAddress\": \"127.0.0.1:2379\",\n  \"root\": \"/vitess/zone2\"\n}\n", r.stdout)
	assert.Contains(t, r.stderr, "note: /cells/notes not decoded: no message type known for it")

	docs := jsonLines(t, tg.ok(t, "get", "-R", "--decode", "json", "-o", "json", "cells/"))
	require.Len(t, docs, 3, "one JSON document per record")
	assert.Equal(t, "/cells/notes", docs[0].Path)
	assert.Nil(t, docs[0].Decoded)
	assert.Contains(t, docs[0].DecodeError, "no message type known")
	assert.Equal(t, []byte("plain text"), docs[0].Value)
	assert.Equal(t, map[string]string{"serverAddress": "127.0.0.1:2379", "root": "/vitess/zone2"}, docs[2].Decoded)
	assert.Empty(t, docs[2].DecodeError)

	assert.Equal(t, "/cells/zone1/CellInfo\n1: \"127.0.0.1:2379\"\n2: \"/vitess/zone1\"\n",
		tg.ok(t, "get", "-R", "--decode", "raw", "cells/zone1/"))

	tg.fails(t, 2, []string{"--keys-only prints no values"}, "get", "--keys-only", "--decode", "json", "cells/")
	tg.fails(t, 2, []string{"does not combine with --decode"}, "get", "-R", "--hex", "--decode", "raw", "cells/")
	tg.fails(t, 2, []string{"apply to one file"}, "get", "-R", "--type", "CellInfo", "--decode", "json", "cells/")
	tg.fails(t, 2, []string{"want raw or json"}, "get", "-R", "--decode", "yaml", "cells/")
}

// watch --decode prints each change decoded: readable text, or "decoded"
// in each change's JSON object.
func TestWatchDecode(t *testing.T) {
	t.Parallel()
	tg := memoryTarget(t)
	putCellInfo(t, tg, "zone1", "/vitess/zone1")

	text := tg.start(t, "watch", "--decode", "json", "cells/zone1/CellInfo")
	text.waitOutput(t, "\"root\": \"/vitess/zone1\"\n}\n")
	js := tg.start(t, "watch", "-R", "--decode", "json", "-o", "json", "cells/")
	js.waitOutput(t, `"decoded":{"serverAddress":"127.0.0.1:2379","root":"/vitess/zone1"}`)

	putCellInfo(t, tg, "zone1", "/vitess/moved")
	text.waitOutput(t, "\"root\": \"/vitess/moved\"\n}\n")
	js.waitOutput(t, `"root":"/vitess/moved"`)
	assert.Equal(t, 0, text.stop(t))
	assert.Equal(t, 0, js.stop(t))
	assert.True(t, strings.HasPrefix(text.stdout.String(), "/cells/zone1/CellInfo "), text.stdout.String())

	docs := jsonLines(t, js.stdout.String())
	require.Len(t, docs, 2)
	assert.Equal(t, "/vitess/moved", docs[1].Decoded["root"])

	tg.fails(t, 2, []string{"--protoset needs --decode json"}, "watch", "--protoset", "x", "cells/zone1/CellInfo")
}
