package ui_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCSPBaseAndFormAction: the page's Content-Security-Policy forbids
// a <base> element (base-uri) and form submissions (form-action): the
// page's forms are handled by its script, never submitted. Without them
// markup injected into the page could point its relative URLs elsewhere,
// or post a form off the page.
func TestCSPBaseAndFormAction(t *testing.T) {
	h := newHarness(t, false)
	for _, p := range []string{"/", "/api/info", "/static/app.js"} {
		req, err := http.NewRequest("GET", h.ts.URL+p, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+h.srv.Token())
		resp, err := h.ts.Client().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "base-uri 'none'", p)
		assert.Contains(t, csp, "form-action 'none'", p)
	}
}

// TestBrowserCSPFormsWork: under the page's policy, each of its forms
// (path, search, coordination, compare) still works, with no violation
// reported; a form submitted past the script, and a <base> element, are
// refused.
func TestBrowserCSPFormsWork(t *testing.T) {
	p, _, _ := stalePage(t, []string{"d/x", "e/y"}, nil)
	p.run("record violations", `(() => { window.violations = []; document.addEventListener("securitypolicyviolation", (e) => window.violations.push(e.effectiveDirective)); return true; })()`)
	violations := func() []string {
		v, err := chromedp.Run(p.ctx, chromedp.Evaluate[[]string](`window.violations`))
		require.NoError(t, err)
		return v
	}
	p.open("/d")
	p.fill("#search", "/e")
	p.click("#searchbar button[type=submit]")
	p.wait("the search", has("#search-results", "/e/y"))
	p.click("#tab-coordination")
	p.fill("#coord-path", "/d")
	p.click("#coord-form button[type=submit]")
	p.click("#tab-compare")
	p.click("#compare-form button[type=submit]")
	p.wait("the comparison", `document.querySelector("#compare-summary").textContent !== ""`)
	require.Empty(t, violations(), "the page's own forms")
	require.Empty(t, p.text("#error"))

	p.run("add a base", `(() => { const b = document.createElement("base"); b.href = "http://127.0.0.2/"; document.head.append(b); return true; })()`)
	p.run("submit a form past the script", `(() => { const f = document.createElement("form"); f.action = "/"; document.body.append(f); f.submit(); return true; })()`)
	p.wait("both refused (a form submitted leaves the page: no violations then)", `window.violations.includes("form-action") && window.violations.includes("base-uri")`)
}

// TestStaticServesNoTemplate: /static/ serves the page's script and style
// only. It served the page's raw template (at /static/ and
// /static/index.html): a page with "{{.CSRF}}" for its CSRF token.
func TestStaticServesNoTemplate(t *testing.T) {
	h := newHarness(t, false)
	for _, p := range []string{"/static/", "/static/index.html"} {
		status, body := h.do("GET", p, "", nil)
		assert.Equal(t, http.StatusNotFound, status, p)
		assert.NotContains(t, body, "{{", p)
	}
	for _, p := range []string{"/static/app.js", "/static/app.css"} {
		status, _ := h.do("GET", p, "", nil)
		assert.Equal(t, http.StatusOK, status, p)
	}
}
