package topoctl

// The connection settings of a command tree (connFlags): their
// environment variables, defaults, and how flags, variables and the
// --config file combine (resolve).

import (
	"log/slog"
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
	// defaultTimeout bounds each store call and each lock wait.
	defaultTimeout = 30 * time.Second
)

// connFlags are the connection settings of a command tree: the store's
// implementation, address, root and cell, the bound of each call, and the
// backends' TLS and authentication settings, as the flags, the
// environment and the --config file give them (see resolve).
type connFlags struct {
	impl    string
	backend string // --backend, an alias of --topo-implementation
	addr    string
	root    string
	cell    string
	timeout time.Duration
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
}

// resolve applies environment variables to flags not set on the command
// line and checks the values.
func resolve(o *options, fs *pflag.FlagSet) error {
	if err := loadConfig(o, fs); err != nil {
		return err
	}
	env := func(flag, key string, dst *string) {
		if !fs.Changed(flag) {
			if v := o.getenv(key); v != "" {
				*dst = v
			} else if v, ok := o.conf[flag]; ok {
				*dst = v
			}
		}
	}
	if fs.Changed("backend") {
		if fs.Changed("topo-implementation") && o.backend != o.impl {
			return usagef("--backend %q and --topo-implementation %q disagree: give one", o.backend, o.impl)
		}
		o.impl = o.backend
	} else {
		env("topo-implementation", envImplementation, &o.impl)
	}
	env("topo-global-server-address", envServerAddress, &o.addr)
	env("topo-global-root", envRoot, &o.root)
	env("cell", envCell, &o.cell)
	if err := resolveSecurity(o, fs); err != nil {
		return err
	}
	if !fs.Changed("timeout") {
		v, what := o.getenv(envTimeout), envTimeout
		if c, ok := o.conf["timeout"]; v == "" && ok {
			v, what = c, "timeout in "+o.configFile
		}
		if v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return usagef("%s=%q: want a duration such as 10s", what, v)
			}
			o.timeout = d
		}
	}
	if o.timeout < 0 {
		return usagef("--timeout must not be negative")
	}
	switch o.output {
	case "text", "json":
	default:
		return usagef("--output %q: want text or json", o.output)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(o.logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", o.logLevel)
	}
	o.log = slog.New(slog.NewTextHandler(o.io.Stderr, &slog.HandlerOptions{Level: level}))
	if o.io.SetDefaultLogger {
		slog.SetDefault(o.log)
	}
	// An unknown implementation is reported as such (NoImplementation,
	// naming the registered ones) before any demand for an address.
	if _, err := topo.GetFactory(o.impl); err != nil {
		return exitError{code: ExitFailure, err: err}
	}
	if _, inConf := o.conf["topo-global-root"]; o.impl == "consul" && !fs.Changed("topo-global-root") && o.getenv(envRoot) == "" && !inConf {
		// The form Vitess's Consul backend works with (no leading "/").
		o.root = strings.TrimPrefix(defaultRoot, "/")
	}
	if o.addr == "" {
		o.addr = conventionalAddress(o, o.impl)
	}
	if o.addr == "" {
		switch o.impl {
		case "etcd2":
			o.addrDefaulted = true
			o.addr = defaultAddress(o)
		case "zk2":
			return usagef("--topo-global-server-address (or %s) is required with --topo-implementation %s", envServerAddress, o.impl)
		case "consul":
			return usagef("--topo-global-server-address (or %s, or CONSUL_HTTP_ADDR) is required with --topo-implementation %s", envServerAddress, o.impl)
		default:
			// memory: "" names one in-process store, like any other
			// string. A backend registered by the program that embeds
			// topoctl gets the address as given, "" included: its
			// factory decides whether it needs one.
		}
	}
	return nil
}

// warnConsulRoot warns on stderr about a Consul root with a leading "/":
// topokit takes "/vitess/global" and "vitess/global" as the same root,
// but Vitess's Consul backend fails to list keys under a root that starts
// with "/", so Vitess processes on the same agent would not see the data.
func warnConsulRoot(o *options, impl, root string) {
	if impl == "consul" && strings.HasPrefix(root, "/") && strings.Trim(root, "/") != "" {
		o.eprintf("topoctl: warning: Consul root %q starts with \"/\": topokit reads it as %q, but Vitess processes fail to list under a leading \"/\"; give the root as %q so that both agree\n",
			root, strings.Trim(root, "/"), strings.Trim(root, "/"))
	}
}

// warnEtcdRoot warns on stderr about an etcd root without a leading "/":
// etcd keys are plain strings, so the root "scratch" holds keys
// "scratch/..." and "/scratch" holds "/scratch/...": two different trees
// that look alike. Vitess's etcd roots start with "/".
func warnEtcdRoot(o *options, impl, root string) {
	if impl == "etcd2" && root != "" && !strings.HasPrefix(root, "/") {
		o.eprintf("topoctl: warning: etcd root %q has no leading \"/\": its keys start with %q, apart from those of the root %q (Vitess's etcd roots start with \"/\")\n",
			root, root+"/", "/"+root)
	}
}

// defaultAddress is the client address of the embedded etcd: the one
// `topoctl serve` recorded in its default data directory, or
// defaultClientAddress.
func defaultAddress(o *options) string {
	if o.impl != "etcd2" {
		return ""
	}
	dir, err := defaultDataDir(o.getenv)
	if err == nil {
		if b, err := os.ReadFile(endpointFile(dir)); err == nil {
			if a := strings.TrimSpace(string(b)); a != "" {
				return a
			}
		}
	}
	return defaultClientAddress
}
