package topoctl

// The whole command tree is built per call by newRoot, with its options in
// a struct owned by that tree: there is no package-level state, so tests
// run many command trees in one process, in parallel.

import (
	goio "io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/middleware"
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
		longRunning(newUICmd(o), ""),
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
