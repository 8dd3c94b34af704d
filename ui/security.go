package ui

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// CookieName begins the name of the cookie that carries the access token
// after the first visit: CookieName, "_" and 16 hex digits of the
// token's SHA-256 (Server.CookieName). Browsers do not tell cookies apart
// by port, so each server's cookie has a name of its own: opening a
// second page (another topoctl ui on another port of the same host) does
// not replace the first one's cookie.
const CookieName = "topokit_ui"

// CookieName returns the name of the cookie that carries this server's
// access token (see the constant CookieName).
func (s *Server) CookieName() string { return s.cookie }

// cookieName is the name of the cookie of token.
func cookieName(token string) string {
	sum := sha256.Sum256([]byte(token))
	return CookieName + "_" + hex.EncodeToString(sum[:8])
}

// CSRFHeader is the header every writing request carries the page's CSRF
// token in.
const CSRFHeader = "X-Topokit-CSRF"

// authorized reports whether r carries the access token, answering 401
// when it does not. A valid "token" query parameter sets the cookie; on a
// page load it also redirects to the same URL without the token, so that
// the token leaves the address bar and the history.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if q := r.URL.Query().Get("token"); q != "" {
		if !same(q, s.opts.Token) {
			writeJSON(w, http.StatusUnauthorized, apiError{Error: "wrong access token", Code: "Unauthorized"})
			return false
		}
		http.SetCookie(w, &http.Cookie{Name: s.cookie, Value: s.opts.Token, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
		if r.Method == http.MethodGet && r.URL.Path == "/" {
			u := *r.URL
			v := u.Query()
			v.Del("token")
			u.RawQuery = v.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return false
		}
		return true
	}
	if c, err := r.Cookie(s.cookie); err == nil && same(c.Value, s.opts.Token) {
		return true
	}
	if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && same(b, s.opts.Token) {
		return true
	}
	writeJSON(w, http.StatusUnauthorized, apiError{Error: "the access token is missing: open the URL topoctl ui printed", Code: "Unauthorized"})
	return false
}

func same(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// writing wraps a writing handler: 403 unless the server is writable, the
// request carries the CSRF token and comes from no foreign origin; the
// body is bounded by MaxBody.
func (s *Server) writing(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.Writable {
			writeJSON(w, http.StatusForbidden, apiError{Error: "read-only: start topoctl ui with --writable to edit", Code: "ReadOnly"})
			return
		}
		if !same(r.Header.Get(CSRFHeader), s.csrf) {
			writeJSON(w, http.StatusForbidden, apiError{Error: "missing or wrong CSRF token: reload the page", Code: "CSRF"})
			return
		}
		if o := r.Header.Get("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || u.Host != r.Host {
				writeJSON(w, http.StatusForbidden, apiError{Error: "cross-origin request refused", Code: "CSRF"})
				return
			}
		}
		if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
			writeJSON(w, http.StatusForbidden, apiError{Error: "cross-site request refused", Code: "CSRF"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.opts.MaxBody)
		h(w, r)
	}
}

// ErrInsecureListen is returned by CheckListen for a non-loopback address
// without TLS or an explicit insecure choice.
var ErrInsecureListen = errors.New("ui: a non-loopback listen address needs TLS (certificate and key) or an explicit --insecure")

// resolveTimeout bounds CheckListen's lookup of localhost.
const resolveTimeout = 5 * time.Second

// lookupFunc resolves a host name (net.Resolver.LookupIPAddr).
type lookupFunc func(ctx context.Context, host string) ([]net.IPAddr, error)

// CheckListen checks a listen address ("host:port"): a loopback host is
// always accepted, that is a loopback IP (127.0.0.0/8, ::1) or
// "localhost" (any case) when every address it resolves to (with
// net.DefaultResolver, bounded by 5 s) is a loopback one; any other host,
// including an empty one (every interface), a localhost that resolves to
// another address (as /etc/hosts or DNS may say) and one whose lookup
// fails, only when tls or insecure is set. It returns ErrInsecureListen
// (wrapped, naming addr and, for localhost, what it resolves to) or the
// error of a malformed addr. It is safe for concurrent use.
func CheckListen(addr string, tls, insecure bool) error {
	return checkListen(addr, tls, insecure, net.DefaultResolver.LookupIPAddr)
}

func checkListen(addr string, tls, insecure bool, lookup lookupFunc) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("ui: listen address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	why := ""
	if strings.EqualFold(host, "localhost") {
		ctx, cancel := context.WithTimeout(context.Background(), resolveTimeout)
		defer cancel()
		ips, err := lookup(ctx, host)
		if err == nil && len(ips) > 0 && allLoopback(ips) {
			return nil
		}
		switch {
		case err != nil:
			why = fmt.Sprintf(": %s cannot be resolved: %v", host, err)
		default:
			why = fmt.Sprintf(": %s resolves to %v, not only to loopback addresses", host, ips)
		}
	}
	if tls || insecure {
		return nil
	}
	return fmt.Errorf("%w (%s%s)", ErrInsecureListen, addr, why)
}

// allLoopback reports whether every address of ips is a loopback one.
func allLoopback(ips []net.IPAddr) bool {
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false
		}
	}
	return true
}
