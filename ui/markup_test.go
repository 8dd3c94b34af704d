package ui_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/memorytopo/memtest"
	"github.com/topokit/topokit/ui"
)

// TestBrowserMarkupShownAsText: names, values, a lock holder's
// description, an election's leader id and value and the store's name
// holding HTML and JavaScript are shown as text wherever the page shows
// them (listing, file, search, coordination, compare, header): nothing
// they hold runs.
func TestBrowserMarkupShownAsText(t *testing.T) {
	const img = `"><img src=x onerror="window.pwned=1">`
	const script = `<script>window.pwned=2</script>` // in values
	const svg = `<svg onload="window.pwned=4">`      // in names (no "/")
	const link = `javascript:window.pwned=3`
	store := memtest.New(t, memtest.Options{})
	conn := store.Server.GlobalCell()
	ctx := context.Background()
	dir := "m/" + img
	for _, f := range []struct{ p, v string }{
		{dir + "/" + svg, img},
		{dir + "/" + link, script},
		{"n/" + svg, link},
	} {
		_, err := conn.Create(ctx, f.p, []byte(f.v))
		require.NoError(t, err)
	}
	lock, err := conn.Lock(ctx, dir, img+script)
	require.NoError(t, err)
	defer func() { _ = lock.Unlock(context.Background()) }()
	part, err := conn.NewLeaderParticipation(svg, img)
	require.NoError(t, err)
	defer part.Stop()
	_, err = part.Campaign(ctx, []byte(script+img))
	require.NoError(t, err)

	p, _ := stalePageOn(t, conn, nil, func(o *ui.Options) { o.Name = img + script })
	p.wait("the store's name as text", has("#store", img+script))
	p.open("/" + dir)
	p.openFile("/" + dir + "/" + svg)
	p.wait("the value as text", has("#show-text", img))
	p.openFile("/" + dir + "/" + link)
	p.wait("the value as text", has("#show-text", script))
	p.fill("#search", "/n/")
	p.click("#searchbar button[type=submit]")
	p.wait("the search result as text", has("#search-results a", "/n/"+svg))
	p.click(`#search-results a[data-path=` + strconv.Quote("/n/"+svg) + `]`)
	p.wait("the value as text", has("#show-text", link))
	p.click("#tab-coordination")
	p.click("#coord-form button[type=submit]")
	p.wait("the lock holder as text", has("#locks td", img+script)+" && "+has("#locks td", "/"+dir))
	p.wait("the leader as text", has("#elections td", img)+" && "+has("#elections td", script+img))
	p.click("#tab-compare")
	p.fill("#compare-a", "/m")
	p.fill("#compare-b", "/n")
	p.click("#compare-form button[type=submit]")
	p.wait("the comparison as text", has("#compare-results code", img+"/"+svg)+" && "+has("#compare-results pre", img))
	p.wait("nothing ran", `window.pwned === undefined && !document.querySelector("img, svg, script:not([src])")`)
}
