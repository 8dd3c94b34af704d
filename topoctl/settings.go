package topoctl

// The connection settings of a command tree (settings): their flags,
// environment variables, defaults, and how flags, variables and the
// --config file combine (resolve).

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/topokit/topokit/topo"
)

// Environment variables read by topoctl. A flag given on the command line
// wins over its variable; a variable wins over the built-in default.
const (
	// envImplementation is --topo-implementation's variable.
	envImplementation = "TOPO_IMPLEMENTATION"
	// envServerAddress is --topo-global-server-address's variable.
	envServerAddress = "TOPO_GLOBAL_SERVER_ADDRESS"
	// envRoot is --topo-global-root's variable.
	envRoot = "TOPO_GLOBAL_ROOT"
	// envCell is --cell's variable.
	envCell = "TOPO_CELL"
	// envTimeout is --timeout's variable (a Go duration such as "10s").
	envTimeout = "TOPO_TIMEOUT"
	// envConfig is --config's variable.
	envConfig = "TOPOCTL_CONFIG"
	// envProtoset is the default of get's --protoset.
	envProtoset = "TOPOCTL_PROTOSET"
	// envDataDir is the default of serve's --data-dir; flag-less commands
	// also read serve's client address from it.
	envDataDir = "TOPOCTL_DATA_DIR"
)

// Defaults of the connection flags. They match what `topoctl serve` runs
// with no flags, so `topoctl serve` in one terminal and `topoctl ls /` in
// another work with no set-up.
const (
	// defaultImplementation is the embedded etcd's backend.
	defaultImplementation = "etcd2"
	// defaultClientAddress is where serve listens for clients by default.
	defaultClientAddress = "127.0.0.1:2379"
	// defaultPeerAddress is where serve listens for etcd peers by default.
	defaultPeerAddress = "127.0.0.1:2380"
	// defaultRoot is the global cell's root: Vitess's usual global root,
	// so that topoctl and Vitess can share one store.
	defaultRoot = "/vitess/global"
	// defaultTimeout bounds each store call and each lock wait (opening
	// a store: see dialBounds).
	defaultTimeout = 30 * time.Second
)

// settings are the connection settings of a command tree: the store's
// implementation, address, root and cell, the bound of each call, and the
// backends' TLS and authentication settings, as the flags, the
// environment and the --config file give them (see resolve). A plain
// value: opening stores with them is the connector's job.
type settings struct {
	impl    string
	backend string // --backend, an alias of --topo-implementation
	addr    string
	root    string
	cell    string
	timeout time.Duration
	// timeoutGiven records that --timeout was given (as a flag, its
	// variable or in the --config file) rather than defaulted: only then
	// does it bound lock's wait for the lock (see lockWait).
	timeoutGiven bool
	// claimTTL is elect's --ttl: how long the connections' claims outlive
	// topoctl (connect.Settings.ClaimTTL; 0: each backend's default).
	claimTTL time.Duration
	// sec holds the backends' TLS and authentication settings.
	sec security
	// configFile is --config; conf the settings read from it (flag name
	// to value).
	configFile string
	conf       map[string]string
	// addrDefaulted records that no address was given: open then checks
	// that something listens at the default address before connecting,
	// and fails at once suggesting `topoctl serve` when nothing does.
	addrDefaulted bool
	// getenv reads the environment (see streams.Getenv); never nil.
	getenv func(string) string
}

// addFlags adds the connection flags, the security flags and --config to
// the persistent flags pf.
func (s *settings) addFlags(pf *pflag.FlagSet) {
	pf.StringVarP(&s.impl, "topo-implementation", "i", defaultImplementation,
		"store implementation (backend), one of the registered factories: "+strings.Join(topo.Factories(), ", ")+" (env "+envImplementation+")")
	pf.StringVarP(&s.backend, "backend", "b", "", "the same as --topo-implementation")
	pf.StringVarP(&s.addr, "topo-global-server-address", "a", "",
		"global cell server address, host:port[,host:port...] (env "+envServerAddress+"; default: the address of \"topoctl serve\", "+defaultClientAddress+")")
	pf.StringVar(&s.root, "topo-global-root", defaultRoot,
		"global cell root in the store (env "+envRoot+"; on Consul give it without a leading \"/\", as Vitess does: the default there is vitess/global)")
	pf.StringVar(&s.cell, "cell", "",
		"act on this cell, through its CellInfo in the global cell (env "+envCell+"; default: the global cell)")
	pf.DurationVar(&s.timeout, "timeout", defaultTimeout,
		"bound of each store call, of opening a store (a store that does not answer within half of it, at least 2s and at most 5s, fails as Unavailable, and 3/8 of it, at least 1s and at most 5s, goes to diagnosing a failed TLS handshake), and of lock's wait for a lock when given (env "+envTimeout+"; 0 means no bound on calls, and opening keeps the backends' 5s; lock waits without bound by default)")
}

// resolve applies the environment and the --config file to the flags not
// set on the command line and checks the values, but for those of
// resolveStore. It returns a usage error for a bad value.
func (s *settings) resolve(fs *pflag.FlagSet) error {
	if err := s.loadConfig(fs); err != nil {
		return err
	}
	env := func(flag, key string, dst *string) {
		if !fs.Changed(flag) {
			if v := s.getenv(key); v != "" {
				*dst = v
			} else if v, ok := s.conf[flag]; ok {
				*dst = v
			}
		}
	}
	if fs.Changed("backend") {
		if fs.Changed("topo-implementation") && s.backend != s.impl {
			return usagef("--backend %q and --topo-implementation %q disagree: give one", s.backend, s.impl)
		}
		s.impl = s.backend
	} else {
		env("topo-implementation", envImplementation, &s.impl)
	}
	env("topo-global-server-address", envServerAddress, &s.addr)
	env("topo-global-root", envRoot, &s.root)
	env("cell", envCell, &s.cell)
	if err := s.resolveSecurity(fs); err != nil {
		return err
	}
	s.timeoutGiven = fs.Changed("timeout")
	if !fs.Changed("timeout") {
		v, what := s.getenv(envTimeout), envTimeout
		if c, ok := s.conf["timeout"]; v == "" && ok {
			v, what = c, "timeout in "+s.configFile
		}
		if v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return usagef("%s=%q: want a duration such as 10s", what, v)
			}
			s.timeout, s.timeoutGiven = d, true
		}
	}
	if s.timeout < 0 {
		return usagef("--timeout must not be negative")
	}
	return nil
}

// resolveStore checks the implementation and fills in the default root
// and address: NoImplementation (exit 1) for an unknown implementation, a
// usage error for a store that needs an address and has none.
func (s *settings) resolveStore(fs *pflag.FlagSet) error {
	// An unknown implementation is reported as such (NoImplementation,
	// naming the registered ones) before any demand for an address.
	if _, err := topo.GetFactory(s.impl); err != nil {
		return exitError{code: ExitFailure, err: err}
	}
	if _, inConf := s.conf["topo-global-root"]; s.impl == "consul" && !fs.Changed("topo-global-root") && s.getenv(envRoot) == "" && !inConf {
		// The form Vitess's Consul backend works with (no leading "/").
		s.root = strings.TrimPrefix(defaultRoot, "/")
	}
	if s.addr == "" {
		s.addr = s.conventionalAddress(s.impl)
	}
	if s.addr == "" {
		switch s.impl {
		case "etcd2":
			s.addrDefaulted = true
			s.addr = s.defaultAddress()
		case "zk2":
			return usagef("--topo-global-server-address (or %s) is required with --topo-implementation %s", envServerAddress, s.impl)
		case "consul":
			return usagef("--topo-global-server-address (or %s, or CONSUL_HTTP_ADDR) is required with --topo-implementation %s", envServerAddress, s.impl)
		default:
			// memory: "" names one in-process store, like any other
			// string. A backend registered by the program that embeds
			// topoctl gets the address as given, "" included: its
			// factory decides whether it needs one.
		}
	}
	return nil
}

// lockWait is how long lock waits for a held lock: --timeout when it was
// given, else no bound (0): a lock may be held for hours by a job that
// runs that long, and lock then waits for it as etcdctl lock and flock do,
// until Ctrl-C.
func (s *settings) lockWait() time.Duration {
	if s.timeoutGiven {
		return s.timeout
	}
	return 0
}

// warnConsulRoot warns on stderr about a Consul root with a leading "/":
// topokit takes "/vitess/global" and "vitess/global" as the same root,
// but Vitess's Consul backend fails to list keys under a root that starts
// with "/", so Vitess processes on the same agent would not see the data.
func warnConsulRoot(out *printer, impl, root string) {
	if impl == "consul" && strings.HasPrefix(root, "/") && strings.Trim(root, "/") != "" {
		out.eprintf("topoctl: warning: Consul root %q starts with \"/\": topokit reads it as %q, but Vitess processes fail to list under a leading \"/\"; give the root as %q so that both agree\n",
			root, strings.Trim(root, "/"), strings.Trim(root, "/"))
	}
}

// warnEtcdRoot warns on stderr about an etcd root without a leading "/":
// etcd keys are plain strings, so the root "scratch" holds keys
// "scratch/..." and "/scratch" holds "/scratch/...": two different trees
// that look alike. Vitess's etcd roots start with "/".
func warnEtcdRoot(out *printer, impl, root string) {
	if impl == "etcd2" && root != "" && !strings.HasPrefix(root, "/") {
		out.eprintf("topoctl: warning: etcd root %q has no leading \"/\": its keys start with %q, apart from those of the root %q (Vitess's etcd roots start with \"/\")\n",
			root, root+"/", "/"+root)
	}
}

// defaultAddress is the client address of the embedded etcd (etcd2's
// default): the one
// `topoctl serve` recorded in its default data directory, or
// defaultClientAddress.
func (s *settings) defaultAddress() string {
	dir, err := defaultDataDir(s.getenv)
	if err == nil {
		if b, err := os.ReadFile(endpointFile(dir)); err == nil {
			if a := strings.TrimSpace(string(b)); a != "" {
				return a
			}
		}
	}
	return defaultClientAddress
}
