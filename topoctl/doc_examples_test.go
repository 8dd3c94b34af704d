package topoctl

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/topokit/topokit/topo/etcd2topo/etcdtest"
)

// docMarker is the line that, right before a ```console block of the
// docs, marks it as one that runs as written on a fresh `make serve`
// store (TestDocExamples runs it). Within a file the marked blocks run in
// order on one store, as a reader following the page would.
const docMarker = "<!-- doctest: runs as written on a fresh `make serve` store -->"

// docCommand is one "$ topoctl ..." line of a marked block and the output
// shown under it.
type docCommand struct {
	line int
	args []string
	want []string
}

// parseDocExamples returns the commands of the marked blocks of a
// Markdown document, in order.
func parseDocExamples(t *testing.T, name, text string) []docCommand {
	t.Helper()
	lines := strings.Split(text, "\n")
	var cmds []docCommand
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != docMarker {
			continue
		}
		require.Less(t, i+1, len(lines), "%s:%d: marker at the end", name, i+1)
		require.Equal(t, "```console", strings.TrimSpace(lines[i+1]), "%s:%d: the marker must precede a ```console block", name, i+1)
		for i += 2; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			l := lines[i]
			if !strings.HasPrefix(l, "$ ") {
				require.NotEmpty(t, cmds, "%s:%d: output before any command", name, i+1)
				cmds[len(cmds)-1].want = append(cmds[len(cmds)-1].want, l)
				continue
			}
			c := docCommand{line: i + 1}
			cmdline := strings.TrimPrefix(l, "$ ")
			for strings.HasSuffix(cmdline, "\\") && i+1 < len(lines) {
				i++
				cmdline = strings.TrimSuffix(cmdline, "\\") + " " + strings.TrimSpace(lines[i])
			}
			c.args = shellWords(t, name, c.line, cmdline)
			require.Equal(t, "topoctl", c.args[0], "%s:%d: a marked block runs topoctl commands only", name, c.line)
			c.args = c.args[1:]
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// shellWords splits a command line as sh would, for the plain lines the
// docs show: words, '...' and "..." quoting, a trailing "# comment".
// Variables, redirections and pipes are refused: a marked line runs as
// written, with nothing left to the shell.
func shellWords(t *testing.T, name string, line int, s string) []string {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			require.GreaterOrEqual(t, j, 0, "%s:%d: unterminated quote", name, line)
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '#' && !inWord:
			i = len(s)
		case strings.IndexByte("$|<>;&`", c) >= 0:
			require.Fail(t, "not runnable as written", "%s:%d: %q needs a shell (%q)", name, line, s, c)
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	require.NotEmpty(t, words, "%s:%d: empty command", name, line)
	return words
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
	return len(got) > 0 && got[0] == want[0] && matchOutput(want[1:], got[1:])
}

// Every marked example of the docs runs as written on a fresh store, in
// the page's order, and prints what the page shows (stdout, then stderr).
// The only variable part is the store's address: the test's etcd listens
// on a port of its own, shown as serve's default 127.0.0.1:2379. Before,
// quickstart's "this fails" example (put --if-version 3 /RoutingRules x)
// succeeded on the store the page had built, overwriting the file.
func TestDocExamples(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("../docs/*.md")
	require.NoError(t, err)
	files = append(files, "../README.md")
	total := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		cmds := parseDocExamples(t, f, string(b))
		if len(cmds) == 0 {
			continue
		}
		total += len(cmds)
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			addr := etcdtest.Start(t)
			addrRE := regexp.MustCompile(regexp.QuoteMeta(addr) + `\b`)
			tg := target{noFlags: true, env: map[string]string{envServerAddress: addr}}
			for _, c := range cmds {
				r := tg.run(t, "", c.args...)
				out := addrRE.ReplaceAllString(r.stdout+r.stderr, defaultClientAddress)
				got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
				if out == "" {
					got = nil
				}
				assert.True(t, matchOutput(c.want, got), "%s:%d: topoctl %s\nthe page shows:\n%s\ntopoctl printed (exit %d):\n%s",
					f, c.line, strings.Join(c.args, " "), strings.Join(c.want, "\n"), r.code, out)
			}
		})
	}
	assert.Positive(t, total, "no marked example found (marker: %s)", docMarker)
}
