package topoctl

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/cache"
	"github.com/topokit/topokit/ui"
)

// newUICmd is `topoctl ui`: the web page of package ui over the store the
// connection flags name.
func newUICmd(stores *connector, out *printer) *cobra.Command {
	var listen, certFile, keyFile, protoset string
	var writable, insecure bool
	var compareWith []string
	cmd := &cobra.Command{
		Use:   "ui",
		Short: "Serve a web page to browse, edit and watch the store",
		Long: `Serve a web page for the store: a tree with versions and sizes, records
decoded, live updates, lock holders and election leaders, compare, and (with
--writable) editing with a diff and compare-and-set. It prints the page's
URL with a random access token; every request needs it. It listens on
127.0.0.1 unless --listen says otherwise; another address (localhost
included, unless every address it resolves to is a loopback one) needs
--tls-cert-file and --tls-key-file, or --insecure, which serves the page
over plain http with a warning. --compare-with adds other
stores to the compare view. Runs until interrupted.`,
		Example: `  topoctl ui
  topoctl ui --writable --listen 127.0.0.1:8000
  topoctl ui --compare-with zk2:127.0.0.1:2181:/vitess/global`,
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			useTLS := certFile != "" || keyFile != ""
			if err := ui.CheckListen(listen, useTLS, insecure); err != nil {
				return usageError{err}
			}
			if useTLS {
				// Checked before anything is opened or printed.
				if certFile == "" || keyFile == "" {
					return usagef("--tls-cert-file and --tls-key-file go together: give both to serve the page over https")
				}
				if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
					return usagef("--tls-cert-file %s, --tls-key-file %s: %v", certFile, keyFile, err)
				}
			}
			// As get --decode: --protoset, else $TOPOCTL_PROTOSET, else
			// the types built in.
			if protoset == "" {
				protoset = stores.getenv(envProtoset)
			}
			reg, err := loadSchema(protoset)
			if err != nil {
				return err
			}
			st, err := stores.open(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			others := map[string]topo.Conn{}
			for _, spec := range compareWith {
				other, err := stores.openFrom(cmd.Context(), "compare-with", spec)
				if err != nil {
					return err
				}
				defer other.Close()
				others[other.name] = other.conn
			}
			files, stopCache := uiCache(st.conn, out.log)
			defer stopCache()
			s, err := ui.New(ui.Options{Conn: st.conn, Files: files, Name: st.name, Stores: others, Writable: writable, Decoder: reg, Log: out.log, CallTimeout: stores.timeout})
			if err != nil {
				return err
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				if errors.Is(err, syscall.EADDRINUSE) {
					return fmt.Errorf("%w (another program, perhaps another \"topoctl ui\", listens there: pick another port with --listen)", err)
				}
				return err
			}
			// The address bound is checked again: a host name (localhost)
			// may resolve otherwise now than when it was checked.
			if err := ui.CheckListen(ln.Addr().String(), useTLS, insecure); err != nil {
				_ = ln.Close()
				return usageError{err}
			}
			if !useTLS && !loopbackAddr(ln.Addr()) {
				out.eprintf("%s", plainHTTPWarning(ln.Addr().String(), writable))
			}
			hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
			scheme := "http"
			if useTLS {
				scheme = "https"
			}
			out.printf("topoctl ui: open %s\n", s.URL(scheme+"://"+pageHost(ln.Addr().String())))
			done := make(chan error, 1)
			go func() {
				if useTLS {
					done <- hs.ServeTLS(ln, certFile, keyFile)
				} else {
					done <- hs.Serve(ln)
				}
			}()
			select {
			case err := <-done:
				return err
			case <-cmd.Context().Done():
				_ = hs.Close()
				if err := <-done; !errors.Is(err, http.ErrServerClosed) {
					return err
				}
				return nil
			}
		},
	}
	f := cmd.Flags()
	f.StringVar(&listen, "listen", "127.0.0.1:8080", "host:port the page is served at (a non-loopback host needs TLS or --insecure)")
	f.BoolVar(&writable, "writable", false, "allow editing, creating and deleting from the page")
	f.BoolVar(&insecure, "insecure", false, "allow a non-loopback --listen without TLS (plain http: warned about)")
	f.StringVar(&certFile, "tls-cert-file", "", "PEM certificate to serve the page over https")
	f.StringVar(&keyFile, "tls-key-file", "", "PEM key of --tls-cert-file")
	f.StringArrayVar(&compareWith, "compare-with", nil, "another store IMPL:ADDR:ROOT the compare view can diff against, read only (repeatable)")
	f.StringVar(&protoset, "protoset", "", "FileDescriptorSet whose messages decode records (default: $"+envProtoset+", else the types built in)")
	return cmd
}

// loopbackAddr reports whether the listener address a is a loopback one.
func loopbackAddr(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// plainHTTPWarning is the warning of a page served over plain http off
// the loopback (--insecure) at addr.
func plainHTTPWarning(addr string, writable bool) string {
	what := "read every file of the store"
	if writable {
		what = "read, change and delete every file of the store (--writable)"
	}
	return fmt.Sprintf("warning: --insecure: the page is served over plain http off the loopback, at %s: its access token and every value it shows cross the network unencrypted, and anyone who can see that traffic can take the token and %s; serve it over https (--tls-cert-file, --tls-key-file) or on 127.0.0.1\n", addr, what)
}

// pageHost is the host:port of the page's URL for the listener address
// addr: this machine's host name when addr is an unspecified address
// (0.0.0.0 or ::, which no browser can open), else addr.
func pageHost(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
		return addr
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		return addr
	}
	return net.JoinHostPort(name, port)
}

// uiCacheMaxBytes bounds the memory of topoctl ui's read cache (paths plus
// values); over it the cache lets every call through to the store.
const uiCacheMaxBytes = 256 << 20

// uiCache returns the Conn the page's file calls use: a read cache
// (topo/cache) of the whole store over conn, so that the tree's values
// come from memory and one store watch serves every open page. The
// cache's health changes are logged (log level info); when it cannot
// start (its first listing fails) the page uses conn directly and a
// warning says why. stop ends the cache and leaves conn open.
func uiCache(conn topo.Conn, log *slog.Logger) (files topo.Conn, stop func()) {
	c, err := cache.New(conn, "", cache.Options{MaxBytes: uiCacheMaxBytes, Logger: log, LeaveConnOpen: true})
	if err != nil {
		log.Warn("topoctl ui: no read cache, the page reads the store", "err", err)
		return conn, func() {}
	}
	st := c.State()
	log.Info("topoctl ui: the page reads files from a cache", "health", st.Health, "files", st.Files, "bytes", st.Bytes)
	return c, c.Close
}
