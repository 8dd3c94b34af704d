package ui_test

import (
	"context"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/topokit/topokit/topo/memorytopo/memtest"
)

// Tests that every format of the editor shows the exact value a save
// replaces, or is not offered.

// editorState is the editor's value, format, and which formats are not
// offered (disabled), in the select's order (json, text, hex).
func (p *page) editorState() []any {
	p.t.Helper()
	st, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]any](`[document.querySelector("#editor").value, document.querySelector("#format").value,
		[...document.querySelector("#format").options].map((o) => o.value + (o.disabled ? " not offered" : ""))]`))
	require.NoError(p.t, err)
	return st
}

// TestBrowserEditUndecodedRecordNotAsJSON: a record of a known (Vitess)
// type whose bytes do not decode, or hold fields its type lacks, opens in
// the editor as hex, and the JSON format is not offered for it. It was:
// JSON opened empty (the review diffed from nothing) and a save of what
// was typed there replaced bytes never shown. Forced to JSON all the
// same, the editor says so and Save stays disabled.
func TestBrowserEditUndecodedRecordNotAsJSON(t *testing.T) {
	conn := memtest.New(t, memtest.Options{}).Server.GlobalCell()
	ctx := context.Background()
	bad := []byte{0xff, 0xff, 0xff}
	_, err := conn.Create(ctx, "keyspaces/bin/Keyspace", bad)
	require.NoError(t, err)
	newer := protowire.AppendTag(nil, 999, protowire.VarintType)
	newer = protowire.AppendVarint(newer, 7)
	_, err = conn.Create(ctx, "keyspaces/newer/Keyspace", newer)
	require.NoError(t, err)
	p, _ := stalePageOn(t, conn, nil, asWritable)
	for _, c := range []struct {
		dir, file string
		value     []byte
	}{{"/keyspaces/bin", "/keyspaces/bin/Keyspace", bad}, {"/keyspaces/newer", "/keyspaces/newer/Keyspace", newer}} {
		p.open(c.dir)
		p.openFile(c.file)
		p.click("#edit")
		require.Equal(t, []any{hex.EncodeToString(c.value), "hex", []any{"json not offered", "text not offered", "hex"}}, p.editorState(), c.file+": editor value, format, formats")
		p.run("force the JSON format", `(() => { const f = document.querySelector("#format"); f.value = "json"; f.dispatchEvent(new Event("change")); return true; })()`)
		require.Contains(t, p.editorState()[0], "not editable as JSON", c.file)
		p.fill("#editor", `{"durabilityPolicy": "none"}`)
		p.click("#review")
		p.wait(c.file+": the review says why there is no diff", has("#diff", "a save would replace bytes not shown here"))
		require.True(t, p.disabledSave(), c.file+": Save enabled")
		p.forceSave()
		requireValue(t, conn, c.file[1:], string(c.value))
		p.click("#cancel-edit")
	}
}

// forceSave runs the page's save of the editor as a press of Save would
// (were it enabled), and waits until it is done.
func (p *page) forceSave() {
	p.t.Helper()
	p.run("press Save all the same", `(window.forced = false, save(false).finally(() => { window.forced = true; }), true)`)
	p.wait("the save done", `window.forced === true`)
}

// disabledSave says whether the Save button is disabled.
func (p *page) disabledSave() bool {
	p.t.Helper()
	d, err := chromedp.Run(p.ctx, chromedp.Evaluate[bool](`document.querySelector("#save").disabled`))
	require.NoError(p.t, err)
	return d
}

// TestBrowserConflictUndecodedRecord: a record edited as JSON, which
// another writer replaces meanwhile with bytes that do not decode: the
// conflict shows those bytes (in hex), and editing on top of them as JSON
// saves nothing until another format is chosen. The conflict showed the
// value empty and its diff from nothing, and a save after "Edit on top of
// the new value" replaced bytes never shown.
func TestBrowserConflictUndecodedRecord(t *testing.T) {
	conn := memtest.New(t, memtest.Options{}).Server.GlobalCell()
	ctx := context.Background()
	keyspace := protowire.AppendTag(nil, 8, protowire.BytesType)
	keyspace = protowire.AppendString(keyspace, "semi_sync")
	_, err := conn.Create(ctx, "keyspaces/ks/Keyspace", keyspace)
	require.NoError(t, err)
	p, _ := stalePageOn(t, conn, nil, asWritable)
	p.open("/keyspaces/ks")
	p.openFile("/keyspaces/ks/Keyspace")
	p.click("#edit")
	require.Equal(t, "json", p.editorState()[1])
	p.fill("#editor", `{"durabilityPolicy": "none"}`)
	p.click("#review")
	p.wait("the diff", has("#diff .add", "none"))
	bad := []byte{0xff, 0xff, 0xff}
	_, err = conn.Update(ctx, "keyspaces/ks/Keyspace", bad, nil)
	require.NoError(t, err)
	p.click("#save")
	p.wait("the conflict", `!document.querySelector("#conflict").hidden`)
	require.Contains(t, p.text("#conflict-value"), "not editable as JSON")
	require.Contains(t, p.text("#conflict-value"), "ff ff ff")
	require.Contains(t, p.text("#conflict-diff"), "cannot be diffed")
	p.click("#rebase")
	require.True(t, p.disabledSave(), "Save enabled on a value the JSON does not show")
	p.wait("the review says why there is no diff", has("#diff", "a save would replace bytes not shown here"))
	p.forceSave()
	requireValue(t, conn, "keyspaces/ks/Keyspace", string(bad))
	// In hex the value is shown exactly, and saves.
	p.run("choose hex", `(() => { const f = document.querySelector("#format"); f.value = "hex"; f.dispatchEvent(new Event("change")); return true; })()`)
	require.Equal(t, []any{"ffffff", "hex", []any{"json not offered", "text not offered", "hex"}}, p.editorState())
	p.fill("#editor", "fffffe")
	p.click("#review")
	p.wait("the hex diff", has("#diff .del", "- ffffff")+" && "+has("#diff .add", "+ fffffe"))
	p.click("#save")
	p.wait("the saved value", has("#show-hex", "ff ff fe"))
	requireValue(t, conn, "keyspaces/ks/Keyspace", "\xff\xff\xfe")
}

// TestBrowserRebaseOnBinaryNotAsText: a text edited as text, which
// another writer makes binary meanwhile: after "Edit on top of the new
// value" the review says the value is not text, and Save stays disabled.
// It diffed from "(not text: ...)" and saved the text over the bytes.
func TestBrowserRebaseOnBinaryNotAsText(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/y"}, asWritable)
	value := []byte{0, 0xff, 'b', 'i', 'n'}
	p.open("/d")
	p.openFile("/d/y")
	p.editReviewed("mine")
	_, err := conn.Update(context.Background(), "d/y", value, nil)
	require.NoError(t, err)
	p.click("#save")
	p.wait("the conflict", `!document.querySelector("#conflict").hidden`)
	p.click("#rebase")
	// (the rebase reviews at once)
	require.True(t, p.disabledSave(), "Save enabled on a value the text does not show")
	p.wait("the review says why there is no diff", has("#diff", "is not text: a save would replace bytes not shown here"))
	p.forceSave()
	requireValue(t, conn, "d/y", string(value))
}

// TestBrowserJSONReencodedSaid: a record whose bytes are not those its
// JSON encodes to (a Tablet written by Vitess, its port_map entries in
// map order: the page encodes them sorted by key) still edits as JSON,
// and the review says that the save replaces its bytes beyond the JSON's
// diff. It showed the JSON's diff only. A record stored as its JSON
// encodes it is reviewed without the note.
func TestBrowserJSONReencodedSaid(t *testing.T) {
	conn := memtest.New(t, memtest.Options{}).Server.GlobalCell()
	ctx := context.Background()
	for _, id := range []string{"100", "101"} {
		b, err := os.ReadFile("../testdata/vitess/vitess-local/zone1/tablets/zone1-0000000" + id + "/Tablet")
		require.NoError(t, err)
		_, err = conn.Create(ctx, "tablets/t"+id+"/Tablet", b)
		require.NoError(t, err)
	}
	p, _ := stalePageOn(t, conn, nil, asWritable)
	for _, c := range []struct {
		id   string
		note bool
	}{{"101", true}, {"100", false}} {
		p.open("/tablets/t" + c.id)
		p.openFile("/tablets/t" + c.id + "/Tablet")
		p.click("#edit")
		require.Equal(t, "json", p.editorState()[1], c.id)
		p.run("edit the hostname", `(() => { const e = document.querySelector("#editor"); e.value = e.value.replace('"hostname": "', '"hostname": "x'); return true; })()`)
		p.click("#review")
		p.wait(c.id+": the diff", has("#diff .add", `"hostname": "x`))
		require.Equal(t, c.note, strings.Contains(p.text("#diff"), "the save replaces its bytes with other ones beyond this diff"), "tablet %s: the note said", c.id)
		p.click("#cancel-edit")
	}
}

// TestBrowserCreateOverAppearedFile: a file another writer creates while
// the page asks for a new file's contents is not overwritten: the
// creation is refused, and the page says the file exists and lists it.
// It said only "node already exists: d/n".
func TestBrowserCreateOverAppearedFile(t *testing.T) {
	p, _, conn := stalePage(t, []string{"d/x"}, asWritable)
	p.open("/d")
	p.click("#new-file")
	p.wait("the path question", has("#modal-text", "Create a file"))
	p.fill("#modal-input", "n")
	p.click("#modal-ok")
	p.wait("the contents question", has("#modal-text", "Contents of /d/n"))
	_, err := conn.Create(context.Background(), "d/n", []byte("theirs"))
	require.NoError(t, err)
	p.fill("#modal-input", "mine")
	p.click("#modal-ok")
	p.wait("the error", `!document.querySelector("#error").hidden`)
	require.Contains(t, p.text("#error"), "Not created: /d/n exists, created by another writer meanwhile")
	p.wait("the file listed", `!!document.querySelector('a[data-path="/d/n"]')`)
	requireValue(t, conn, "d/n", "theirs")
}
