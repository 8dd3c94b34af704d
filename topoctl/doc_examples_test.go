package topoctl

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/internal/etcdembed"
	"github.com/topokit/topokit/topo/consultopo/consultest"
	"github.com/topokit/topokit/topo/zk2topo/zktest"
)

// The docs' shell examples and what TestDocExamples does with them.
//
// A shell example is a fenced block of README.md or docs/*.md whose
// fence says console, sh, bash or shell, or says nothing and holds a
// topoctl command. In docs/quickstart.md every shell example runs; in the
// other docs, those that run topoctl. A block runs as a reader would run
// it, in the page's order, on one store per page: `topoctl serve` (the
// embedded etcd of `make serve`) with a fresh data directory. A "$ "
// line is a command (bash, with a "\" continuation), the lines under it
// the output it prints (stdout and stderr as a terminal shows them), where
// a line "..." stands for any lines, "..." in a line for any text, and
// HOST, PID and LEASE for a host name, a process id and a lease number. A
// block without "$ " lines is a script that must succeed.
//
// A comment line right before the fence changes that:
//
//	<!-- doctest: skip: REASON -->   not run, for the reason given
//	<!-- doctest: serve -->          the block is serve's banner: serve starts here
//	<!-- doctest: serve stopped -->  runs while serve is stopped
const docDirective = "<!-- doctest: "

// What a reader's machine has and the test's has instead: the test's
// servers listen on ports of their own, shown as the usual ones, and its
// files live in a directory of its own.
const (
	docEtcdPeer   = "127.0.0.1:2380"
	docZooKeeper  = "127.0.0.1:2181"
	docConsul     = "127.0.0.1:8500"
	docDataDir    = "/home/you/.local/share/topokit/etcd"
	docSharedData = "../shared/data"
)

// docBlock is one shell example.
type docBlock struct {
	file      string
	line      int    // of the fence
	directive string // "", "serve", "serve stopped" or "skip: ..."
	cmds      []docCommand
	script    string // a block without "$ " lines
}

// docCommand is one "$ " line of a block and the output shown under it.
type docCommand struct {
	line    int
	cmdline string
	want    []string
}

var shellFence = regexp.MustCompile("^```(console|sh|bash|shell)?$")

// parseDocBlocks returns the shell examples of a Markdown document.
func parseDocBlocks(t *testing.T, name, text string, everyShell bool) []docBlock {
	t.Helper()
	lines := strings.Split(text, "\n")
	var blocks []docBlock
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(l, "```") {
			continue
		}
		m := shellFence.FindStringSubmatch(l)
		start := i
		var body []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			body = append(body, lines[i])
		}
		if m == nil {
			continue // another language
		}
		b := docBlock{file: name, line: start + 1}
		if start > 0 {
			if d, ok := strings.CutPrefix(strings.TrimSpace(lines[start-1]), docDirective); ok {
				d, ok = strings.CutSuffix(d, " -->")
				require.True(t, ok, "%s:%d: a doctest directive ends with -->", name, start)
				require.True(t, d == "serve" || d == "serve stopped" || (strings.HasPrefix(d, "skip: ") && len(d) > len("skip: ")),
					"%s:%d: unknown doctest directive %q", name, start, d)
				b.directive = d
			}
		}
		runsTopoctl := false
		for j := 0; j < len(body); j++ {
			bl := body[j]
			if strings.HasPrefix(strings.TrimPrefix(bl, "$ "), "topoctl ") || strings.HasPrefix(strings.TrimPrefix(bl, "$ "), "bin/topoctl ") ||
				strings.HasPrefix(strings.TrimPrefix(bl, "$ "), "make serve") {
				runsTopoctl = true
			}
			if !strings.HasPrefix(bl, "$ ") {
				if len(b.cmds) > 0 {
					b.cmds[len(b.cmds)-1].want = append(b.cmds[len(b.cmds)-1].want, bl)
				}
				continue
			}
			c := docCommand{line: start + 2 + j, cmdline: strings.TrimPrefix(bl, "$ ")}
			for strings.HasSuffix(c.cmdline, "\\") && j+1 < len(body) {
				j++
				c.cmdline += "\n" + body[j]
			}
			b.cmds = append(b.cmds, c)
		}
		if m[1] == "" && !runsTopoctl {
			continue // a diagram or some output
		}
		if !everyShell && !runsTopoctl {
			continue
		}
		if len(b.cmds) == 0 {
			b.script = strings.Join(body, "\n")
		} else if !strings.HasPrefix(b.directive, "skip: ") && strings.TrimSpace(body[0]) != "" && !strings.HasPrefix(body[0], "$ ") {
			require.Failf(t, "output before any command", "%s:%d", name, start+2)
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// wantLine is the regular expression of one output line the docs show.
func wantLine(l string) *regexp.Regexp {
	re := regexp.QuoteMeta(l)
	re = strings.ReplaceAll(re, `\.\.\.`, `.*`)
	for ph, sub := range map[string]string{"HOST": `\S+`, "PID": `\d+`, "LEASE": `\d+`} {
		re = regexp.MustCompile(`\b`+ph+`\b`).ReplaceAllString(re, sub)
	}
	return regexp.MustCompile("^" + re + "$")
}

// matchOutput compares output lines with the shown ones, where a line
// "..." stands for any number of lines.
func matchOutput(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for k := 0; k <= len(got); k++ {
			if matchOutput(want[1:], got[k:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && wantLine(want[0]).MatchString(got[0]) && matchOutput(want[1:], got[1:])
}

// docSession is one page's run: its store, its servers and its files.
type docSession struct {
	t        *testing.T
	dir      string // the working directory; bin/topoctl is there
	env      []string
	etcd     [2]string // serve's client and peer addresses
	serve    *exec.Cmd
	serveOut *syncBuffer
	serveEnd chan struct{}
	zk       string
	consul   string
	data     string // the shared Vitess data, "" when absent
	// noData is set at the first block that needs the absent data: the
	// page's later blocks build on it and are not run either.
	noData bool
	// from and to rewrite what the test's run prints (to) as the page
	// shows it (from); the first typed of them are also what a reader
	// types, rewritten for the test's run.
	from, to []string
	typed    int
}

func newDocSession(t *testing.T, bin string) *docSession {
	t.Helper()
	s := &docSession{t: t, dir: t.TempDir(), data: sharedData(t)}
	addrs, err := etcdembed.FreeAddrs(1)
	require.NoError(t, err)
	// A port of four digits, as 2379 has: the CellInfo records that
	// hold the address have the size the page shows.
	s.etcd = [2]string{shortFreeAddr(t), addrs[0]}
	require.NoError(t, os.MkdirAll(filepath.Join(s.dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(bin, filepath.Join(s.dir, "bin", "topoctl")))
	require.NoError(t, os.MkdirAll(filepath.Join(s.dir, "tmp"), 0o755))
	dataDir := filepath.Join(s.dir, "data")
	s.env = append(os.Environ(),
		"PATH="+filepath.Join(s.dir, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		envDataDir+"="+dataDir, "HOME="+s.dir, "LC_ALL=C")
	s.from = []string{defaultClientAddress, docEtcdPeer, "/tmp/"}
	s.to = []string{s.etcd[0], s.etcd[1], filepath.Join(s.dir, "tmp") + "/"}
	s.typed = len(s.from)
	s.rewriteOutput(dataDir, docDataDir)
	if s.data != "" {
		abs, err := filepath.Abs(s.data)
		require.NoError(t, err)
		s.env = append(s.env, "DATA="+abs)
		s.rewriteOutput(abs, docSharedData)
	}
	for _, v := range []string{envImplementation, envServerAddress, envRoot, envCell, envTimeout, "ETCDCTL_ENDPOINTS", "CONSUL_HTTP_ADDR", envProtoset} {
		s.env = append(s.env, v+"=")
	}
	return s
}

// shortFreeAddr returns a free 127.0.0.1 address whose port has four
// digits.
func shortFreeAddr(t *testing.T) string {
	t.Helper()
	for range 200 {
		addr := fmt.Sprintf("127.0.0.1:%d", 2000+rand.IntN(8000))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		require.NoError(t, l.Close())
		return addr
	}
	require.FailNow(t, "no free port of four digits")
	return ""
}

// rewriteOutput shows what the test's run prints as got in the docs'
// words want.
func (s *docSession) rewriteOutput(got, want string) {
	s.from = append(s.from, want)
	s.to = append(s.to, got)
}

// input is a command line as the test runs it.
func (s *docSession) input(cmdline string) string {
	for i := range s.typed {
		cmdline = strings.ReplaceAll(cmdline, s.from[i], s.to[i])
	}
	return cmdline
}

var controlBytes = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f]")

// output is what a run printed as the docs show it: the test's addresses
// and directories as the usual ones, and no control bytes (a terminal
// shows none).
func (s *docSession) output(out string) []string {
	// Longer first: an address of four digits is a prefix of others.
	order := make([]int, len(s.to))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return len(s.to[order[a]]) > len(s.to[order[b]]) })
	for _, i := range order {
		out = strings.ReplaceAll(out, s.to[i], s.from[i])
	}
	out = controlBytes.ReplaceAllString(out, "")
	if out == "" {
		return nil
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t") // as the page, which keeps no trailing blanks
	}
	return lines
}

// startServe runs `topoctl serve` (args as the docs give them) on the
// session's ports and data directory, and returns once it serves.
func (s *docSession) startServe(args string) {
	t := s.t
	t.Helper()
	cmd := exec.Command("bash", "-c", s.input(args)+" --listen-client-address "+s.etcd[0]+" --listen-peer-address "+s.etcd[1])
	cmd.Dir, cmd.Env = s.dir, s.env
	s.serveOut = &syncBuffer{}
	cmd.Stdout, cmd.Stderr = s.serveOut, s.serveOut
	require.NoError(t, cmd.Start())
	s.serve, s.serveEnd = cmd, make(chan struct{})
	end := s.serveEnd
	go func() {
		_ = cmd.Wait()
		close(end)
	}()
	t.Cleanup(s.stopServe)
	require.Eventually(t, func() bool {
		select {
		case <-end:
			return true
		default:
		}
		return strings.Contains(s.serveOut.String(), "Stop it with Ctrl-C")
	}, 2*time.Minute, 20*time.Millisecond)
	select {
	case <-end:
		require.FailNow(t, "topoctl serve ended", "%s", s.serveOut.String())
	default:
	}
}

// stopServe stops serve as Ctrl-C would, if it runs.
func (s *docSession) stopServe() {
	if s.serve == nil {
		return
	}
	_ = s.serve.Process.Signal(syscall.SIGINT)
	select {
	case <-s.serveEnd:
	case <-time.After(time.Minute):
		_ = s.serve.Process.Kill()
		<-s.serveEnd
		s.t.Errorf("topoctl serve did not stop on SIGINT:\n%s", s.serveOut.String())
	}
	s.serve = nil
}

// servers starts the ZooKeeper and Consul servers a block names, once.
func (s *docSession) servers(text string) {
	if strings.Contains(text, "$ZK") && s.zk == "" {
		s.zk = zktest.Start(s.t)
		s.env = append(s.env, "ZK="+s.zk)
		s.rewriteOutput(s.zk, docZooKeeper)
	}
	if strings.Contains(text, "$CONSUL") && s.consul == "" {
		s.consul = consultest.Start(s.t)
		s.env = append(s.env, "CONSUL="+s.consul)
		s.rewriteOutput(s.consul, docConsul)
	}
}

// shell runs a command line with bash in the session and returns what it
// printed, stdout and stderr as they came.
func (s *docSession) shell(cmdline string) (string, error) {
	ctx, cancel := context.WithTimeout(s.t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", s.input(cmdline))
	cmd.Dir, cmd.Env = s.dir, s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// run runs one block.
func (s *docSession) run(b docBlock) {
	t := s.t
	text := b.script
	for _, c := range b.cmds {
		text += c.cmdline + "\n"
	}
	if s.noData || (s.data == "" && strings.Contains(text, "$DATA")) {
		s.noData = true
		t.Logf("%s:%d not run: the shared Vitess data is absent (set %s), and the page builds on it from here", b.file, b.line, envSharedData)
		return
	}
	s.servers(text)
	switch b.directive {
	case "serve":
		require.Len(t, b.cmds, 1, "%s:%d: a serve block holds one command", b.file, b.line)
		s.stopServe()
		s.startServe(b.cmds[0].cmdline)
		got := s.output(s.serveOut.String())
		assert.True(t, matchOutput(b.cmds[0].want, got), "%s:%d: %s\nthe page shows:\n%s\nit printed:\n%s",
			b.file, b.cmds[0].line, b.cmds[0].cmdline, strings.Join(b.cmds[0].want, "\n"), strings.Join(got, "\n"))
		return
	case "serve stopped":
		s.stopServe()
		defer s.startServe("topoctl serve")
	default:
		if s.serve == nil {
			s.startServe("topoctl serve")
		}
	}
	if b.script != "" {
		out, err := s.shell(b.script)
		assert.NoError(t, err, "%s:%d: the script fails:\n%s", b.file, b.line, out)
		return
	}
	for _, c := range b.cmds {
		out, err := s.shell(c.cmdline)
		got := s.output(out)
		assert.True(t, matchOutput(c.want, got), "%s:%d: %s\nthe page shows:\n%s\nit printed (%v):\n%s",
			b.file, c.line, c.cmdline, strings.Join(c.want, "\n"), err, strings.Join(got, "\n"))
	}
}

// Every shell example of the docs runs as written on a fresh store, in
// the page's order, and prints what the page shows: all of quickstart.md's,
// and the other docs' that run topoctl, unless marked with the reason
// they cannot run here (another machine, a terminal, a long-running
// process). Before, quickstart's "this fails" example (put --if-version 3
// /RoutingRules x) succeeded on the store the page had built, overwriting
// the file, and most examples ran nowhere.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	files = append(files, "../README.md")
	// The topoctl a reader builds: the test binary registers backends of
	// its own, which would show in messages that list them.
	bin := filepath.Join(t.TempDir(), "topoctl")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/topoctl")
	build.Dir = ".."
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/topoctl: %s", out)
	ran, skipped := 0, 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		blocks := parseDocBlocks(t, f, string(b), filepath.Base(f) == "quickstart.md")
		var run []docBlock
		for _, bl := range blocks {
			if strings.HasPrefix(bl.directive, "skip: ") {
				skipped++
				continue
			}
			run = append(run, bl)
		}
		if len(run) == 0 {
			continue
		}
		ran += len(run)
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			s := newDocSession(t, bin)
			for _, bl := range run {
				s.run(bl)
			}
		})
	}
	t.Logf("%d blocks run, %d marked not runnable", ran, skipped)
	assert.Positive(t, ran, "no shell example found")
	// 13: the three-terminal cluster (3 blocks), the symmetric start, a second
	// lock holder, a terminal on stdin, curl against a background watch,
	// three machines, and building or serving with make; each says why.
	assert.LessOrEqual(t, skipped, 13, "examples that cannot run must be few")
}
