package topoctl

// The whole command tree is built per call by newRoot, with its options in
// a struct owned by that tree: there is no package-level state, so tests
// run many command trees in one process, in parallel.

import (
	"fmt"
	goio "io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/topokit/topokit/topo"
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

// input is what a command tree reads: standard input and the
// environment.
type input struct {
	stdin goio.Reader
	// isTerminal is streams.StdinIsTerminal.
	isTerminal func() bool
	// getenv reads the environment; never nil.
	getenv func(string) string
}

// terminal reports whether standard input is an interactive terminal
// (see streams.StdinIsTerminal).
func (in *input) terminal() bool {
	if in.isTerminal != nil {
		return in.isTerminal()
	}
	f, ok := in.stdin.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// cmdTree is what runMain needs of a command tree once it ran: its
// printer for the error line and exit code, whether the command started
// (its flags and arguments were accepted: an error before that is a usage
// error), and how to stop the metrics server.
type cmdTree struct {
	out         *printer
	started     bool
	stopMetrics func()
}

func newRoot(io streams) (*cobra.Command, *cmdTree) {
	if io.Stdin == nil {
		io.Stdin = strings.NewReader("")
	}
	if io.Stdout == nil {
		io.Stdout = goio.Discard
	}
	if io.Stderr == nil {
		io.Stderr = goio.Discard
	}
	if io.Getenv == nil {
		io.Getenv = func(string) string { return "" }
	}
	if sameWriter(io.Stdout, io.Stderr) {
		// One writer for both (Main(ctx, args, nil, &buf, &buf)): commands
		// write to stdout and stderr from different goroutines (lock's
		// command output, watch's reconnection notes), so serialise the
		// writes. Files are left alone: their writes are safe already,
		// and lock hands them to its command as they are.
		w := &lockedWriter{w: io.Stdout}
		io.Stdout, io.Stderr = w, w
	}
	out := newPrinter(io)
	in := &input{stdin: io.Stdin, isTerminal: io.StdinIsTerminal, getenv: io.Getenv}
	stores := &connector{settings: settings{getenv: io.Getenv}, out: out}
	t := &cmdTree{out: out}
	var logLevel, metricsAddr string
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
the root as if it had one: "hello" is "/hello". -R means a directory and
everything under it (its subtree) in every command; get and watch take
--prefix for a plain string prefix instead.

With no flags it talks to the embedded etcd that "topoctl serve" runs, under
the root ` + defaultRoot + `: at the client address serve recorded in its
default data directory (` + defaultClientAddress + ` unless serve was given
--listen-client-address), else at ` + defaultClientAddress + `.

Every connection flag can also come from the environment:
  ` + envImplementation + `, ` + envServerAddress + `, ` + envRoot + `, ` + envCell + `, ` + envTimeout + `
A flag on the command line wins over its variable.

Exit codes: 0 success, 1 failure (or differences found by diff, or files
at reserved paths that a tree command could not carry over), 2 usage error,
3 LockLost (lock, elect), 130 interrupted (Ctrl-C or SIGTERM before a
command finished: while connecting, reading or listing, during an import,
copy, export, rm -R, a lock wait or lock's command); "lock" exits with its
command's status otherwise; watch, serve, elect, leader --observe and lock
without a command end with 0 on Ctrl-C, their normal way to stop (a serve
--cluster node that stopped without leaving its cluster: 130).`,
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
			if err := resolve(cmd.Flags(), stores, out, logLevel, io.SetDefaultLogger); err != nil {
				return err
			}
			t.started = true
			if metricsAddr != "" {
				stop, err := startMetrics(cmd.Context(), cmd, stores, metricsAddr)
				t.stopMetrics = stop
				return err
			}
			return nil
		},
	}
	root.SetIn(io.Stdin)
	root.SetOut(io.Stdout)
	root.SetErr(io.Stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	stores.addFlags(pf)
	pf.StringVarP(&out.format, "output", "o", "text", "output format: text or json (JSON on stdout, one value per line, from reading and writing commands alike: a write says what it wrote)")
	stores.sec.addFlags(pf)
	pf.StringVar(&stores.configFile, "config", "", "file of connection settings, one \"flag-name = value\" per line ('#' starts a line's comment, or a trailing one after a space); a flag or variable wins over it (env "+envConfig+")")
	pf.StringVar(&logLevel, "log-level", "error", "log level of topoctl and the backends: debug, info, warn or error (logs go to stderr; debug logs one record per store call)")
	pf.StringVar(&metricsAddr, "metrics-address", "", "serve Prometheus metrics of the store calls (topo_*) at http://HOST:PORT/metrics while a long-running command runs (serve, watch, lock, elect, leader --observe)")

	root.AddCommand(
		longRunning(newServeCmd(stores, in, out), ""),
		newClusterCmd(stores, out),
		completesPaths(newLsCmd(stores, out), stores),
		completesPaths(newTreeCmd(stores, out), stores),
		completesPaths(newGetCmd(stores, out), stores),
		completesPaths(newPutCmd(stores, in, out), stores),
		completesPaths(newRmCmd(stores, out), stores),
		longRunning(completesPathArg(newWatchCmd(stores, out), stores, pathArg{variadic: true}), ""),
		longRunning(completesPathArg(newLockCmd(stores, in, out), stores, pathArg{dirsOnly: true}), ""),
		longRunning(completesNames(newElectCmd(stores, out), stores, electionNames, false), ""),
		longRunning(completesNames(newLeaderCmd(stores, out), stores, electionNames, false), "observe"),
		completesPathArg(newCopyCmd(stores, out), stores, pathArg{dirsOnly: true, storeFlag: "from"}),
		completesPathArg(newDiffCmd(stores, out), stores, pathArg{dirsOnly: true, storeFlag: "from"}),
		completesPathArg(newImportCmd(stores, out), stores, pathArg{index: 1, dirsOnly: true}),
		completesPathArg(newExportCmd(stores, out), stores, pathArg{index: 1, dirsOnly: true}),
		newCellCmd(stores, out),
		completesPaths(newStatCmd(stores, out), stores),
		newTxnCmd(stores, in, out),
		newVersionCmd(stores, out),
		newTLSCmd(out),
		longRunning(newUICmd(stores, out), ""),
	)
	_ = root.RegisterFlagCompletionFunc("cell", func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return completeName(c, stores, toComplete, cellNames, true)
	})
	root.InitDefaultCompletionCmd()
	root.InitDefaultHelpCmd()
	for _, cc := range root.Commands() {
		if cc.Name() == "help" {
			// cobra's help prints the root's usage for an unknown topic
			// and succeeds; a typo in a script's "help" should fail as
			// an unknown command does.
			show := cc.Run
			cc.RunE = func(c *cobra.Command, args []string) error {
				if found, rest, err := root.Find(args); len(args) > 0 && (err != nil || found == root || len(rest) > 0) {
					// Not usagef: its hint would name "help --help".
					return exitError{code: ExitUsage, err: fmt.Errorf("unknown help topic %q; 'topoctl --help' lists the commands", strings.Join(args, " "))}
				}
				show(c, args)
				return nil
			}
		}
	}
	for _, cc := range root.Commands() {
		if cc.Name() == "completion" {
			groupCmd(cc)
			cc.Example = `  source <(topoctl completion bash)
  topoctl completion zsh > "${fpath[1]}/_topoctl"
  topoctl completion fish > ~/.config/fish/completions/topoctl.fish`
			examples := map[string]string{
				"bash":       `  source <(topoctl completion bash)`,
				"zsh":        `  topoctl completion zsh > "${fpath[1]}/_topoctl"`,
				"fish":       `  topoctl completion fish | source`,
				"powershell": `  topoctl completion powershell | Out-String | Invoke-Expression`,
			}
			for _, sc := range cc.Commands() {
				sc.Example = examples[sc.Name()]
			}
		}
	}
	return root, t
}

// resolve resolves the connection settings of c (see settings.resolve and
// resolveStore), checks --output and sets out's logger at logLevel (also as
// slog's default when setDefault), in the order a user's mistakes are
// reported.
func resolve(fs *pflag.FlagSet, c *connector, out *printer, logLevel string, setDefault bool) error {
	if err := c.resolve(fs); err != nil {
		return err
	}
	switch out.format {
	case "text", "json":
	default:
		return usagef("--output %q: want text or json", out.format)
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(logLevel)); err != nil {
		return usagef("--log-level %q: want debug, info, warn or error", logLevel)
	}
	out.log = slog.New(slog.NewTextHandler(out.stderr, &slog.HandlerOptions{Level: level}))
	out.logLevelGiven = fs.Changed("log-level")
	if setDefault {
		slog.SetDefault(out.log)
	}
	return c.resolveStore(fs)
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
