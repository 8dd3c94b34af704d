package topoctl

// The whole command tree is built per call by newRoot, with its options in
// a struct owned by that tree: there is no package-level state, so tests
// run many command trees in one process, in parallel.

import (
	"context"
	"errors"
	"fmt"
	goio "io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/middleware"
)

// Exit codes of topoctl, as Main and Run return them.
const (
	// ExitOK: the command succeeded (diff: the trees are identical).
	ExitOK = 0
	// ExitFailure: the operation failed (the error line on stderr names the
	// path and the error code), or diff found differences.
	ExitFailure = 1
	// ExitUsage: the command line was wrong (unknown command or flag, bad
	// flag value, wrong number of arguments, a bad environment variable).
	ExitUsage = 2
	// ExitLockLost: lock's command was stopped because the store dropped
	// the lock (lease or session lost), or elect lost its leadership.
	ExitLockLost = 3
	// ExitInterrupted: SIGINT or SIGTERM (in Main: ctx's end) ended a
	// command that had work left: while it connected, read or listed, an
	// import, copy, export or rm -R (what it wrote is reverted), a lock
	// wait; as shells report Ctrl-C (128+2).
	ExitInterrupted = 130
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

// streams is where a command tree reads and writes, and how it sees the
// environment. A nil Getenv reads nothing from the environment.
type streams struct {
	Stdin  goio.Reader
	Stdout goio.Writer
	Stderr goio.Writer
	Getenv func(string) string
	// StdinIsTerminal reports whether Stdin is an interactive terminal,
	// which "put" does not read a value from unless told to with "-". Nil
	// means: Stdin is a file descriptor that is a terminal.
	StdinIsTerminal func() bool
	// StdoutIsTerminal reports whether Stdout is a terminal, where get
	// shows values that are not text quoted and tree commands draw a
	// progress bar. Nil means: Stdout is a file descriptor that is a
	// terminal.
	StdoutIsTerminal func() bool
	// SetDefaultLogger makes runMain install topoctl's logger (stderr, at
	// --log-level) as slog's default, which the backends log through. The
	// binary sets it; in-process callers such as tests leave it false so
	// that they do not change process-wide state.
	SetDefaultLogger bool
}

// options holds everything one command tree's flags set. One is created per
// newRoot call and shared by that tree's commands only.
type options struct {
	io streams

	// connFlags are the connection settings: which store, where, and how
	// (its fields are promoted: o.addr, o.sec, ...).
	connFlags

	output   string
	logLevel string

	// parallel and progress are the tree commands' --parallel and
	// --progress.
	parallel int
	progress bool
	// batch is copy's and import's --batch.
	batch int
	// fullValues is watch's --full.
	fullValues bool

	log *slog.Logger

	// metricsAddr is --metrics-address; metrics the topo metrics every
	// connection records into when it is set, and stopMetrics ends their
	// HTTP server (see startMetrics).
	metricsAddr string
	metrics     *middleware.Metrics
	stopMetrics func()

	// started is set once flags and arguments were accepted: an error
	// returned before that is a usage error.
	started bool
	// stores names the stores opened, for connection error messages.
	stores []string
}

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

// usageError marks an error as a command-line mistake (exit code 2).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// exitError ends topoctl with a given exit code. A nil err prints nothing
// more (the command already reported what it had to).
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
func (e exitError) Unwrap() error { return e.err }

// stdinIsTerminal reports whether standard input is an interactive
// terminal (see IO.StdinIsTerminal).
func stdinIsTerminal(o *options) bool {
	if o.io.StdinIsTerminal != nil {
		return o.io.StdinIsTerminal()
	}
	f, ok := o.io.Stdin.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

func (o *options) getenv(k string) string {
	if o.io.Getenv == nil {
		return ""
	}
	return o.io.Getenv(k)
}

func newRoot(io streams) (*cobra.Command, *options) {
	o := &options{io: io}
	if o.io.Stdin == nil {
		o.io.Stdin = strings.NewReader("")
	}
	if o.io.Stdout == nil {
		o.io.Stdout = goio.Discard
	}
	if o.io.Stderr == nil {
		o.io.Stderr = goio.Discard
	}
	if sameWriter(o.io.Stdout, o.io.Stderr) {
		// One writer for both (Main(ctx, args, nil, &buf, &buf)): commands
		// write to stdout and stderr from different goroutines (lock's
		// command output, watch's reconnection notes), so serialise the
		// writes. Files are left alone: their writes are safe already,
		// and lock hands them to its command as they are.
		w := &lockedWriter{w: o.io.Stdout}
		o.io.Stdout, o.io.Stderr = w, w
	}
	root := &cobra.Command{
		Use:   "topoctl",
		Short: "Operate a topology store (etcd, ZooKeeper, Consul or memory)",
		Long: `topoctl reads and writes a topology store through topokit: files, directories,
watches, locks and leader elections, on etcd ("etcd2"), ZooKeeper ("zk2"),
Consul ("consul") or an in-process memory store ("memory"), or any other
backend the binary registered (topo.MustRegisterFactory in its init); this binary has:
  ` + strings.Join(topo.Factories(), ", ") + `
Select one with --topo-implementation (-i, or --backend, -b) and give its
address and root with --topo-global-server-address and --topo-global-root.
Every path is within that root. A path without a leading "/" is taken from
the root as if it had one: "hello" is "/hello".

With no flags it talks to the embedded etcd that "topoctl serve" runs, at
` + defaultClientAddress + ` under the root ` + defaultRoot + `.

Every connection flag can also come from the environment:
  ` + envImplementation + `, ` + envServerAddress + `, ` + envRoot + `, ` + envCell + `, ` + envTimeout + `
A flag on the command line wins over its variable.

Exit codes: 0 success, 1 failure (or differences found by diff, or files
at reserved paths that a tree command could not carry over), 2 usage error,
3 LockLost (lock, elect), 130 interrupted (Ctrl-C or SIGTERM before a
command finished: while connecting, reading or listing, during an import,
copy, export, rm -R, a lock wait or lock's command); "lock" exits with its
command's status otherwise; watch, serve, elect and leader --observe end
with 0 on Ctrl-C, their normal way to stop.`,
		Example: `  topoctl serve                 # in one terminal: an embedded etcd
  topoctl put /hello world      # in another
  topoctl ls -R /
  topoctl -i zk2 -a 127.0.0.1:2181 --topo-global-root /vitess/global get -R /keyspaces/
  topoctl copy --from etcd2:127.0.0.1:2379:/vitess --to consul:127.0.0.1:8500:vitess`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// "topoctl completion bash|zsh|fish|powershell" prints a shell
		// completion script.
		CompletionOptions: cobra.CompletionOptions{},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := resolve(o, cmd.Flags()); err != nil {
				return err
			}
			o.started = true
			if o.metricsAddr != "" {
				return startMetrics(o, cmd.Context(), cmd)
			}
			return nil
		},
	}
	root.SetIn(o.io.Stdin)
	root.SetOut(o.io.Stdout)
	root.SetErr(o.io.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringVarP(&o.impl, "topo-implementation", "i", defaultImplementation,
		"store implementation (backend), one of the registered factories: "+strings.Join(topo.Factories(), ", ")+" (env "+envImplementation+")")
	pf.StringVarP(&o.backend, "backend", "b", "", "the same as --topo-implementation")
	pf.StringVarP(&o.addr, "topo-global-server-address", "a", "",
		"global cell server address, host:port[,host:port...] (env "+envServerAddress+"; default: the address of \"topoctl serve\", "+defaultClientAddress+")")
	pf.StringVar(&o.root, "topo-global-root", defaultRoot,
		"global cell root in the store (env "+envRoot+"; on Consul give it without a leading \"/\", as Vitess does: the default there is vitess/global)")
	pf.StringVar(&o.cell, "cell", "",
		"act on this cell, through its CellInfo in the global cell (env "+envCell+"; default: the global cell)")
	pf.DurationVar(&o.timeout, "timeout", defaultTimeout,
		"bound of each store call, and of waits for locks (env "+envTimeout+"; 0 means no bound)")
	pf.StringVarP(&o.output, "output", "o", "text", "output format of reading commands: text or json")
	addSecurityFlags(o, pf)
	pf.StringVar(&o.configFile, "config", "", "file of connection settings, one \"flag-name = value\" per line ('#' starts a comment); a flag or variable wins over it (env "+envConfig+")")
	pf.StringVar(&o.logLevel, "log-level", "error", "log level of topoctl and the backends: debug, info, warn or error (logs go to stderr; debug logs one record per store call)")
	pf.StringVar(&o.metricsAddr, "metrics-address", "", "serve Prometheus metrics of the store calls (topo_*) at http://HOST:PORT/metrics while a long-running command runs (serve, watch, lock, elect, leader --observe)")

	root.AddCommand(
		longRunning(newServeCmd(o), ""),
		newClusterCmd(o),
		newLsCmd(o),
		newTreeCmd(o),
		newGetCmd(o),
		newPutCmd(o),
		newRmCmd(o),
		longRunning(newWatchCmd(o), ""),
		longRunning(newLockCmd(o), ""),
		longRunning(newElectCmd(o), ""),
		longRunning(newLeaderCmd(o), "observe"),
		newCopyCmd(o),
		newDiffCmd(o),
		newImportCmd(o),
		newExportCmd(o),
		newCellCmd(o),
		newStatCmd(o),
		newTxnCmd(o),
		newVersionCmd(o),
		newTLSCmd(o),
	)
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			groupCmd(c)
			c.Example = `  source <(topoctl completion bash)
  topoctl completion zsh > "${fpath[1]}/_topoctl"
  topoctl completion fish > ~/.config/fish/completions/topoctl.fish`
			examples := map[string]string{
				"bash":       `  source <(topoctl completion bash)`,
				"zsh":        `  topoctl completion zsh > "${fpath[1]}/_topoctl"`,
				"fish":       `  topoctl completion fish | source`,
				"powershell": `  topoctl completion powershell | Out-String | Invoke-Expression`,
			}
			for _, sc := range c.Commands() {
				sc.Example = examples[sc.Name()]
			}
		}
	}
	return root, o
}

// sameWriter reports whether a and b are the same writer, other than an
// *os.File (or a writer of a type that cannot be compared).
func sameWriter(a, b goio.Writer) bool {
	if _, ok := a.(*os.File); ok {
		return false
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

// lockedWriter serialises the writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  goio.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// groupCmd makes cmd, a command that only groups subcommands, fail with
// a usage error (exit 2) when run without one or with an unknown one,
// instead of printing its help and succeeding.
func groupCmd(cmd *cobra.Command) *cobra.Command {
	cmd.Args = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unknown command %q for %q", args[0], c.CommandPath())
		}
		return nil
	}
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		names := []string{}
		for _, sc := range c.Commands() {
			if sc.IsAvailableCommand() {
				names = append(names, sc.Name())
			}
		}
		return usagef("%s needs a subcommand: %s", c.CommandPath(), strings.Join(names, ", "))
	}
	return cmd
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

// runMain is Main with the environment and terminal detection of io.
func runMain(ctx context.Context, args []string, io streams) int {
	cmd, o := newRoot(io)
	cmd.SetArgs(args)
	ran, err := cmd.ExecuteContextC(ctx)
	if o.stopMetrics != nil {
		o.stopMetrics()
	}
	if err == nil {
		return ExitOK
	}
	helpOf := "topoctl"
	if ran != nil {
		helpOf = ran.CommandPath()
	}
	var ee exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintf(o.io.Stderr, "topoctl: %s\n", o.formatError(ee.err))
		}
		return ee.code
	}
	var ue usageError
	if !errors.As(err, &ue) && o.started && ctx.Err() != nil {
		// Ctrl-C or SIGTERM ended the command (while it connected, listed,
		// read...): the failure is the interruption's, whatever error the
		// call it cut short returned.
		fmt.Fprintf(o.io.Stderr, "topoctl: interrupted: %s\n", o.formatError(err))
		return ExitInterrupted
	}
	if errors.As(err, &ue) || !o.started {
		fmt.Fprintf(o.io.Stderr, "topoctl: %s\nRun '%s --help' for usage.\n", escapeLines(err.Error()), helpOf)
		return ExitUsage
	}
	fmt.Fprintf(o.io.Stderr, "topoctl: %s\n", o.formatError(err))
	if topo.CodeOf(err) == topo.LockLost {
		return ExitLockLost
	}
	return ExitFailure
}

// formatError renders err as one line: the symbolic error code first when
// it is a topo error, then the message (which names the path).
func (o *options) formatError(err error) string {
	msg := escapeControl(slashPaths(err))
	c := topo.CodeOf(err)
	if c == 0 {
		return msg
	}
	msg = codeName(c) + ": " + msg
	if c == topo.Unavailable || c == topo.Timeout {
		// A store that could not be reached is named by the error itself.
		if len(o.stores) > 0 && !strings.Contains(msg, "nothing accepts connections at") && !strings.Contains(msg, "cannot resolve the host name") && !strings.Contains(msg, "no answer within") {
			msg += " (store " + strings.Join(o.stores, ", ") + ")"
		}
	}
	return msg
}

// codeName returns the Go name of a topo error code, e.g. "NoNode".
func codeName(c topo.ErrorCode) string {
	switch c {
	case topo.NodeExists:
		return "NodeExists"
	case topo.NoNode:
		return "NoNode"
	case topo.NodeNotEmpty:
		return "NodeNotEmpty"
	case topo.Timeout:
		return "Timeout"
	case topo.Interrupted:
		return "Interrupted"
	case topo.BadVersion:
		return "BadVersion"
	case topo.PartialResult:
		return "PartialResult"
	case topo.NoUpdateNeeded:
		return "NoUpdateNeeded"
	case topo.NoImplementation:
		return "NoImplementation"
	case topo.ResourceExhausted:
		return "ResourceExhausted"
	case topo.InvalidPath:
		return "InvalidPath"
	case topo.InvalidArgument:
		return "InvalidArgument"
	case topo.Closed:
		return "Closed"
	case topo.Compacted:
		return "Compacted"
	case topo.LockLost:
		return "LockLost"
	case topo.Unavailable:
		return "Unavailable"
	case topo.PermissionDenied:
		return "PermissionDenied"
	case topo.ReadOnly:
		return "ReadOnly"
	case topo.NotLeader:
		return "NotLeader"
	case topo.NoLeader:
		return "NoLeader"
	}
	return fmt.Sprintf("Code%d", int(c))
}

// slashPaths returns err's message with the paths of the *topo.Error
// values in its chain shown as users type them, with a leading "/" (the
// backends name canonical paths, without it). It sets those paths in place:
// call it only on an error that is about to be printed.
func slashPaths(err error) string {
	var chain []*topo.Error
	for e := err; e != nil; {
		if te, ok := e.(*topo.Error); ok {
			chain = append(chain, te)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			e = u.Unwrap()
		case interface{ Unwrap() []error }:
			if es := u.Unwrap(); len(es) > 0 {
				e = es[0]
			} else {
				e = nil
			}
		default:
			e = nil
		}
	}
	olds := make([]string, len(chain))
	for i, te := range chain {
		olds[i] = te.Error()
	}
	for _, te := range chain {
		// NoImplementation's "path" is the implementation's name.
		if te.Path != "" && !strings.HasPrefix(te.Path, "/") && te.Code != topo.NoImplementation {
			te.Path = "/" + te.Path
		}
	}
	msg := err.Error()
	for i, te := range chain {
		msg = strings.Replace(msg, olds[i], te.Error(), 1)
	}
	return msg
}

// escapeLines is escapeControl for a message of several lines, such as
// cobra's "unknown command" with its "Did you mean this?" suggestions: each
// line, without its leading tabs, is escaped; the newlines and those tabs
// stay. Trailing newlines are dropped.
func escapeLines(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		rest := strings.TrimLeft(l, "\t")
		lines[i] = l[:len(l)-len(rest)] + escapeControl(rest)
	}
	return strings.Join(lines, "\n")
}

// escapeControl makes s printable on one terminal line: control bytes
// (newlines included) and invalid UTF-8 are shown as \xNN escapes.
func escapeControl(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0):
			if r < 0x80 {
				fmt.Fprintf(&b, "\\x%02x", r)
			} else {
				fmt.Fprintf(&b, "\\u%04x", r)
			}
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
