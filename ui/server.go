package ui

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/decode"
)

//go:embed assets
var assets embed.FS

// Defaults of Options.
const (
	// DefaultMaxBody bounds a request body, in bytes: a value of
	// topo.MaxValueSize sent as JSON text, with room for escaping.
	DefaultMaxBody = 4*topo.MaxValueSize + 64<<10
	// DefaultPageSize is the number of directory entries per page.
	DefaultPageSize = 200
	// DefaultCallTimeout bounds each store call of a request.
	DefaultCallTimeout = 30 * time.Second
	// DefaultCoalesce is how long live changes are gathered before the
	// page is told about them, in one event.
	DefaultCoalesce = 200 * time.Millisecond
)

// Options are the settings of a Server. Conn is required; every other
// field has a default.
type Options struct {
	// Conn is the store the page shows (usually a Server's GlobalCell).
	Conn topo.Conn
	// Files, if not nil, serves the page's file calls instead of Conn:
	// the tree's listings and values, a record, search, edits and
	// deletes, and live updates. It must be a view of the same store as
	// Conn, usually a read cache over it (topo/cache: the tree's values
	// come from memory, one store watch serves every open page, and the
	// page's own edits are read back at once). Lock, election and
	// semaphore views, earlier versions, store metadata and compare always
	// use Conn, because a cache holds files only. Nil means Conn.
	Files topo.Conn
	// Name names the store on the page (e.g. "etcd2 127.0.0.1:2379
	// /vitess/global").
	Name string
	// Stores are other stores, by name, that the page can compare the
	// main one with. They are only read.
	Stores map[string]topo.Conn
	// Writable allows editing, creating and deleting. Without it every
	// writing request is refused with 403.
	Writable bool
	// Token is the access token; empty means a random one (see
	// Server.Token).
	Token string
	// Decoder decodes records; nil means decode.Builtin().
	Decoder *decode.Registry
	// Log receives one record per failed request; nil means slog.Default().
	Log *slog.Logger
	// CallTimeout bounds each store call (0: DefaultCallTimeout).
	CallTimeout time.Duration
	// MaxBody bounds request bodies, in bytes (0: DefaultMaxBody).
	MaxBody int64
	// PageSize is the number of directory entries per page (0:
	// DefaultPageSize).
	PageSize int
	// Coalesce is how long live changes are gathered into one event (0:
	// DefaultCoalesce).
	Coalesce time.Duration
}

// Server serves the page and its API. It implements http.Handler and is
// safe for concurrent use.
type Server struct {
	opts   Options
	csrf   string
	cookie string // the name of the token's cookie (cookieName)
	mux    *http.ServeMux
	page   *template.Template
	files  http.Handler
}

// New returns a Server for opts. It fails (InvalidArgument) when opts.Conn
// is nil or a size is negative, and when no random token can be made.
func New(opts Options) (*Server, error) {
	if opts.Conn == nil {
		return nil, &topo.Error{Code: topo.InvalidArgument, Err: errors.New("ui: Options.Conn is nil")}
	}
	if opts.MaxBody < 0 || opts.PageSize < 0 || opts.CallTimeout < 0 || opts.Coalesce < 0 {
		return nil, &topo.Error{Code: topo.InvalidArgument, Err: errors.New("ui: negative size or duration in Options")}
	}
	if opts.Files == nil {
		opts.Files = opts.Conn
	}
	if opts.Decoder == nil {
		opts.Decoder = decode.Builtin()
	}
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.CallTimeout == 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.MaxBody == 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.Coalesce == 0 {
		opts.Coalesce = DefaultCoalesce
	}
	if opts.Token == "" {
		t, err := randomToken()
		if err != nil {
			return nil, err
		}
		opts.Token = t
	}
	csrf, err := randomToken()
	if err != nil {
		return nil, err
	}
	page, err := template.ParseFS(assets, "assets/index.html")
	if err != nil {
		return nil, err
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	s := &Server{opts: opts, csrf: csrf, cookie: cookieName(opts.Token), mux: http.NewServeMux(), page: page,
		files: http.StripPrefix("/static/", http.FileServer(http.FS(static)))}
	s.routes()
	return s, nil
}

// Token returns the access token every request must carry.
func (s *Server) Token() string { return s.opts.Token }

// URL returns the address of the page for a server reachable at base
// ("http://127.0.0.1:8080"), with the access token.
func (s *Server) URL(base string) string {
	return strings.TrimSuffix(base, "/") + "/?token=" + s.opts.Token
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("ui: random token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /{$}", s.index)
	// Only the page's script and style: the page itself is served at /
	// (its template, rendered); /static/ and /static/index.html served
	// the raw template, a page that cannot work.
	s.mux.Handle("GET /static/app.js", s.files)
	s.mux.Handle("GET /static/app.css", s.files)
	s.mux.HandleFunc("GET /api/info", s.info)
	s.mux.HandleFunc("GET /api/cache", s.cacheState)
	s.mux.HandleFunc("GET /api/dir", s.dir)
	s.mux.HandleFunc("GET /api/file", s.file)
	s.mux.HandleFunc("GET /api/search", s.search)
	s.mux.HandleFunc("GET /api/count", s.count)
	s.mux.HandleFunc("GET /api/version", s.version)
	s.mux.HandleFunc("GET /api/events", s.events)
	s.mux.HandleFunc("GET /api/coordination", s.coordination)
	s.mux.HandleFunc("GET /api/compare", s.compare)
	s.mux.HandleFunc("PUT /api/file", s.writing(s.put))
	s.mux.HandleFunc("DELETE /api/file", s.writing(s.del))
	s.mux.HandleFunc("POST /api/delete-tree", s.writing(s.deleteTree))
}

// ServeHTTP checks the access token, then serves the page or the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	if !s.authorized(w, r) {
		return
	}
	s.mux.ServeHTTP(w, r)
}

// index serves the page, with the CSRF token.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_ = s.page.Execute(w, map[string]any{"CSRF": s.csrf, "Name": s.opts.Name, "Writable": s.opts.Writable})
}

// info describes the server to the page.
func (s *Server) info(w http.ResponseWriter, r *http.Request) {
	names := make([]string, 0, len(s.opts.Stores))
	for n := range s.opts.Stores {
		names = append(names, n)
	}
	sort.Strings(names)
	writeJSON(w, http.StatusOK, map[string]any{"name": s.opts.Name, "writable": s.opts.Writable, "stores": names, "pageSize": s.opts.PageSize})
}

// callCtx bounds one store call of a request.
func (s *Server) callCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.opts.CallTimeout)
}

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// fail answers err with the HTTP status of its topo.Error code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusInternalServerError
	var te *topo.Error
	code := ""
	if errors.As(err, &te) {
		code = te.Code.String()
		switch te.Code {
		case topo.InvalidPath, topo.InvalidArgument:
			status = http.StatusBadRequest
		case topo.NoNode:
			status = http.StatusNotFound
		case topo.NodeExists, topo.BadVersion:
			status = http.StatusConflict
		case topo.NoImplementation:
			status = http.StatusNotImplemented
		case topo.Timeout:
			status = http.StatusGatewayTimeout
		case topo.Compacted:
			status = http.StatusGone
		case topo.Unavailable:
			status = http.StatusServiceUnavailable
		}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		// (net/http's own message, "request body too large", says not
		// how large, nor that it is the request that is, not the value)
		status, code = http.StatusRequestEntityTooLarge, "TooLarge"
		err = fmt.Errorf("the request is more than the %d bytes a request may hold (a value sent as text or hex, at most %d bytes, fits; its JSON may not)", mbe.Limit, topo.MaxValueSize)
	}
	if status == http.StatusInternalServerError {
		s.opts.Log.Warn("ui request failed", "method", r.Method, "path", r.URL.Path, "err", err)
	}
	writeJSON(w, status, apiError{Error: err.Error(), Code: code})
}

// badRequest is an InvalidArgument error with msg.
func badRequest(msg string) error {
	return &topo.Error{Code: topo.InvalidArgument, Err: errors.New(msg)}
}
