package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo/memtest"
)

// shardReplication is a ShardReplication record of n bytes or a few
// less: as many nodes (tablet zone1-100) as fit.
func shardReplication(n int) string {
	alias := protowire.AppendTag(nil, 1, protowire.BytesType)
	alias = protowire.AppendString(alias, "zone1")
	alias = protowire.AppendTag(alias, 2, protowire.VarintType)
	alias = protowire.AppendVarint(alias, 100)
	node := protowire.AppendTag(nil, 1, protowire.BytesType)
	node = protowire.AppendBytes(node, alias)
	one := protowire.AppendTag(nil, 1, protowire.BytesType)
	one = protowire.AppendBytes(one, node)
	return strings.Repeat(string(one), n/len(one))
}

// TestFormatsOfferedSaveAtSizeLimit: a value of topo.MaxValueSize bytes
// (or nearly) saves, unchanged, in every format the page offers for it,
// as the page sends it (the value in that format, and the SHA-256 of the
// value it replaces),
// within the default bound of a request body. JSON was offered for a
// ShardReplication of that size, whose JSON is several times larger:
// its save was refused (413), whatever the edit. JSON is not offered
// for a record whose JSON cannot be sent back; the answer says why.
func TestFormatsOfferedSaveAtSizeLimit(t *testing.T) {
	h := newHarness(t, true)
	files := map[string]string{
		"big/bin":                                strings.Repeat("\xff", topo.MaxValueSize),
		"big/quotes":                             strings.Repeat(`"\`, topo.MaxValueSize/2),
		"big/lines":                              strings.Repeat("\t\n", topo.MaxValueSize/2),
		"keyspaces/ks/shards/0/ShardReplication": shardReplication(topo.MaxValueSize),
	}
	for p, v := range files {
		h.put(p, v)
	}
	for p, v := range files {
		status, body := h.do("GET", "/api/file?path=/"+p, "", nil)
		require.Equal(t, http.StatusOK, status, p)
		var f struct {
			Version, Hex, SHA256, Decoded, JSONEditError string
			Text                                         *string
			JSONEdit                                     bool
		}
		require.NoError(t, json.Unmarshal([]byte(body), &f), p)
		formats := map[string]string{"hex": f.Hex}
		if f.Text != nil {
			formats["text"] = *f.Text
		}
		if f.JSONEdit {
			formats["json"] = f.Decoded
		} else if strings.HasSuffix(p, "ShardReplication") {
			require.Contains(t, f.JSONEditError, "too large", p)
		}
		for format, value := range formats {
			req, err := json.Marshal(map[string]string{"path": "/" + p, "version": f.Version, "baseSha256": f.SHA256, "format": format, "value": value})
			require.NoError(t, err)
			status, body := h.write("PUT", "/api/file", string(req))
			require.Equal(t, http.StatusOK, status, "%s as %s (a request of %d bytes): %s", p, format, len(req), body)
			require.Equal(t, v, h.value(p), p)
			status, body = h.do("GET", "/api/file?path=/"+p, "", nil)
			require.Equal(t, http.StatusOK, status, p)
			require.NoError(t, json.Unmarshal([]byte(body), &f), p)
		}
	}
}

// TestBrowserEditAtSizeLimit: values of topo.MaxValueSize bytes edit
// through the page, reviewed and saved, as hex and as text. Each value is
// edited on a page of its own: a second file clicked on the page that has
// just saved the first could meet its listing re-rendered by the save's
// own event, and the click was lost.
func TestBrowserEditAtSizeLimit(t *testing.T) {
	bin := strings.Repeat("\xff", topo.MaxValueSize)
	text := strings.Repeat("\"line\\\"\n", topo.MaxValueSize/8)
	for _, c := range []struct{ file, value, format, edit, want string }{
		{"/big/bin", bin, "hex", `e.value = e.value.slice(0, -2) + "fe"`, bin[:len(bin)-1] + "\xfe"},
		{"/big/text", text, "text", `e.value = "x" + e.value.slice(1)`, "x" + text[1:]},
	} {
		t.Run(c.format, func(t *testing.T) {
			p, _, conn := stalePage(t, nil, asWritable)
			_, err := conn.Create(context.Background(), c.file[1:], []byte(c.value))
			require.NoError(t, err)
			p.open("/big")
			p.openFile(c.file)
			p.click("#edit")
			require.Equal(t, c.format, p.editorState()[1], c.file)
			p.run("edit "+c.file, `(() => { const e = document.querySelector("#editor"); `+c.edit+`; return true; })()`)
			p.click("#review")
			p.wait(c.file+": the diff", `document.querySelectorAll("#diff .add").length === 1 && document.querySelectorAll("#diff .del").length === 1 && !document.querySelector("#save").disabled`)
			p.click("#save")
			p.wait(c.file+": saved", `document.querySelector("#editor-box").hidden`)
			require.Empty(t, p.text("#error"), c.file)
			requireValue(t, conn, c.file[1:], c.want)
		})
	}
}

// oversizedConn is a store holding, at path big, a value over
// topo.MaxValueSize, as another tool may write one (etcd takes 1.5 MiB):
// a Get of big reads it, other calls go to Conn.
type oversizedConn struct {
	topo.Conn
	big   string
	value []byte
}

func (c oversizedConn) Get(ctx context.Context, p string) ([]byte, topo.Version, error) {
	b, v, err := c.Conn.Get(ctx, p)
	if err == nil && p == c.big {
		b = c.value
	}
	return b, v, err
}

// TestBrowserDeleteOversized: a file holding more than topo.MaxValueSize
// bytes (another tool's) is deleted from the page, and edited down to a
// value within the limit. The page's delete and save carried the value
// shown in hex, twice the value's size: more than a request may hold
// (413), whatever the edit. They carry its SHA-256 now.
func TestBrowserDeleteOversized(t *testing.T) {
	store := memtest.New(t, memtest.Options{})
	inner := store.Server.GlobalCell()
	ctx := context.Background()
	for _, p := range []string{"d/big", "d/edit"} {
		_, err := inner.Create(ctx, p, []byte("v"))
		require.NoError(t, err)
	}
	big := []byte(strings.Repeat("\xfe", topo.MaxValueSize*3))
	conn := oversizedConn{Conn: inner, big: "d/edit", value: big}
	p, _ := stalePageOn(t, conn, nil, asWritable)
	p.open("/d")
	p.openFile("/d/edit")
	p.click("#edit")
	require.Equal(t, "hex", p.editorState()[1])
	p.fill("#editor", "0102")
	p.click("#review")
	p.wait("the diff", has("#diff .add", "+ 0102"))
	p.click("#save")
	p.wait("saved", `document.querySelector("#editor-box").hidden || !document.querySelector("#error").hidden`)
	require.Empty(t, p.text("#error"), "the save of the oversized file")
	requireValue(t, inner, "d/edit", "\x01\x02")

	conn.big = "d/big"
	p2, _ := stalePageOn(t, conn, nil, asWritable)
	p2.open("/d")
	p2.openFile("/d/big")
	p2.click("#delete-file")
	p2.wait("the confirmation", has("#modal-text", "Delete the file /d/big"))
	p2.click("#modal-ok")
	p2.wait("deleted", `document.querySelector("#file").hidden || !document.querySelector("#error").hidden`)
	require.Empty(t, p2.text("#error"), "the delete of the oversized file")
	_, _, err := inner.Get(ctx, "d/big")
	require.True(t, topo.IsErrType(err, topo.NoNode), "d/big deleted: %v", err)
}
