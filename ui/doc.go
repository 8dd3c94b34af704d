// Package ui serves a web page for a topology store: a lazy, paginated tree
// with what `topoctl stat` shows (sizes, versions, ephemeral entries), a
// search by path prefix, records decoded through topo/decode beside their
// raw bytes (hex and text), editing with a diff and compare-and-set, create
// and delete (recursive deletes show their count first), live updates
// streamed with Server-Sent Events, the coordination view (lock holders,
// election leaders, semaphore holders, through topo/inspect), the
// comparison of two subtrees or two stores (topo/copy's Compare) and, on
// stores that keep history (etcd), earlier versions of a file.
//
// The page is plain HTML with a little JavaScript and CSS, all embedded in
// the binary (package embed): nothing is loaded from the internet and
// nothing needs building. The browser talks to a small JSON API under
// /api/ (see the handlers in this package).
//
// # Security
//
// Every request must carry the access token (Server.Token): as the
// "token" query parameter of the first visit, which sets an HttpOnly,
// SameSite=Strict cookie (named for the server: Server.CookieName), as
// that cookie afterwards, or as an
// "Authorization: Bearer" header. Writing requests (PUT, POST, DELETE) are
// refused with 403 unless Options.Writable is set, and must carry the
// page's CSRF token in the X-Topokit-CSRF header, with no foreign Origin.
// Request bodies are bounded (Options.MaxBody), and every path is checked
// with the library's rules (topo.CleanFilePath, CleanDirPath, CleanPrefix)
// before the store sees it. CheckListen refuses a non-loopback listen
// address (localhost included when it resolves to any other address)
// unless TLS or an explicit insecure choice is made.
//
// The package holds no command-line code: topoctl's "ui" command and any
// Go program hand New a topo.Conn. It uses only the Conn contract and the
// operation packages (topo/tree, topo/copy, topo/decode, topo/inspect), so
// it behaves alike on every backend, except for history (GetVersion:
// etcd and memory keep it, ZooKeeper and Consul answer NoImplementation)
// and what inspect.StoreMeta reads per backend.
//
// A Server is safe for concurrent use.
package ui
