package ui_test

import (
	"strconv"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestBrowserReloadKeepsDirWithPercent: the directory shown is kept in
// the address (#PATH), so that a reload (or a bookmark) opens it again.
// A path may hold "%" (the library's rules allow it): a reload opens the
// same directory, not the one its "%41" spells once percent-decoded
// ("/aA"; "/%2e%2e" is not ".."), and a "%" that starts no escape
// ("/100%", "/50%zz") does not stop the page from loading.
func TestBrowserReloadKeepsDirWithPercent(t *testing.T) {
	p, _, _ := stalePage(t, []string{"a%41/x", "aA/y", "100%/z", "50%zz/w", "sp ace#h/v", "%2e%2e/u"}, nil)
	for _, c := range []struct{ dir, row string }{
		{"/a%41", "/a%41/x"},
		{"/100%", "/100%/z"},
		{"/50%zz", "/50%zz/w"},
		{"/sp ace#h", "/sp ace#h/v"},
		{"/%2e%2e", "/%2e%2e/u"}, // not ".." once decoded
	} {
		p.open(c.dir)
		p.do("reload the page", chromedp.Reload())
		p.wait("the page to load again, live", `document.body.dataset.ready === "true" && `+isLive)
		p.wait(c.dir+" shown again after the reload",
			`document.querySelector("#dir-title").textContent.startsWith(`+strconv.Quote(c.dir+" (")+`) && !!document.querySelector('a[data-path=`+strconv.Quote(c.row)+`]')`)
	}
}
