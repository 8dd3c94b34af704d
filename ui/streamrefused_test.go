package ui_test

import (
	"testing"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
)

// TestBrowserStreamRefusedRetried: a live stream answered with an HTTP
// error at a reconnection (503: the store is unreachable) is tried again:
// the badge says why it is not live, and says "live" again once a stream
// started and the read after it succeeded. The browser's EventSource gives
// up for good on such an answer, and the badge said "reconnecting…" until
// the page was reloaded.
func TestBrowserStreamRefusedRetried(t *testing.T) {
	p, store, _ := stalePage(t, []string{"d/x"}, nil)
	p.open("/d")
	remove := store.Factory.AddFault(memorytopo.Fault{Op: memorytopo.OpWatchRecursive, Err: topo.Unavailable})
	defer remove()
	store.Factory.BreakWatches(nil) // the stream ends; its reconnection is answered 503
	p.wait("the badge to say why", has("#live", "not live: the live stream failed (")+` && `+has("#live", "injected fault"))
	remove()
	p.wait("live again", isLive)
}
