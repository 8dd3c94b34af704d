package ui_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/memorytopo/memtest"
)

// TestBrowserUndecodedRecordSaysSo: a record that does not decode as the
// type of its path (bytes that are no protobuf, or text) opens raw, on
// the Hex or Text tab, and the page says, where it is seen, that it is
// not decoded and why: not only on the Decoded tab, which is not shown.
func TestBrowserUndecodedRecordSaysSo(t *testing.T) {
	conn := memtest.New(t, memtest.Options{}).Server.GlobalCell()
	ctx := context.Background()
	_, err := conn.Create(ctx, "keyspaces/bin/Keyspace", []byte{0xff, 0xff, 0xff})
	require.NoError(t, err)
	_, err = conn.Create(ctx, "keyspaces/txt/Keyspace", []byte("hello, not a record"))
	require.NoError(t, err)
	p, _ := stalePageOn(t, conn, nil, nil)
	for _, c := range []struct{ dir, file, tab, raw string }{
		{"/keyspaces/bin", "/keyspaces/bin/Keyspace", "#show-hex", "ff ff ff"},
		{"/keyspaces/txt", "/keyspaces/txt/Keyspace", "#show-text", "hello, not a record"},
	} {
		p.open(c.dir)
		p.openFile(c.file)
		p.wait(c.file+" shown raw", has(c.tab, c.raw))
		p.wait(c.file+": a note, where it is seen, that it is not decoded", has("#file-info", "not decoded: value is not a topokit.topodata.Keyspace"))
	}
}
