package etcdtest

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// ServerVersionEnv names the environment variable that chooses the etcd
// server version the members run: one of ServerVersions(). Unset or empty
// means DefaultServerVersion.
const ServerVersionEnv = "TOPOKIT_ETCDTEST_SERVER"

// DefaultServerVersion is the etcd server version the members run unless
// ServerVersionEnv says otherwise: the one `topoctl serve` embeds.
const DefaultServerVersion = "v3.6.16"

// ServerVersions returns the etcd server versions etcdtest can run (a
// go.mod for each is kept in server/).
func ServerVersions() []string { return []string{"v3.6.16", "v3.7.3"} }

// serverSource is the member program and, per server version, the go.mod
// that builds it (server/<version>.mod), with one go.sum for them all.
//
//go:embed server/main.go server/*.mod server/go.sum
var serverSource embed.FS

// ServerVersion returns the etcd server version the members run (see
// ServerVersionEnv), or an error naming the versions etcdtest knows when
// the variable asks for another.
func ServerVersion() (string, error) {
	v := os.Getenv(ServerVersionEnv)
	if v == "" {
		return DefaultServerVersion, nil
	}
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	if !slices.Contains(ServerVersions(), v) {
		return "", fmt.Errorf("etcdtest: %s=%s: etcdtest runs etcd server %s", ServerVersionEnv, os.Getenv(ServerVersionEnv), strings.Join(ServerVersions(), " or "))
	}
	return v, nil
}

// serverBinary builds the member program once per process and returns
// its path.
var serverBinary = sync.OnceValues(buildServer)

// buildServer builds the member program for ServerVersion in a module of
// its own (so the server's etcd packages are those of its version, not
// those of the module under test) into the user's cache directory, keyed
// by the program's source, its go.mod and go.sum and the Go toolchain; a
// binary already there is reused. It runs the go command from PATH (go
// test puts its toolchain's first). Concurrent test processes may build the
// same binary: each writes a file of its own and renames it into place.
func buildServer() (string, error) {
	version, err := ServerVersion()
	if err != nil {
		return "", err
	}
	files := map[string]string{"main.go": "server/main.go", "go.mod": "server/" + version + ".mod", "go.sum": "server/go.sum"}
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	contents := map[string][]byte{}
	for _, name := range []string{"main.go", "go.mod", "go.sum"} {
		b, err := serverSource.ReadFile(files[name])
		if err != nil {
			return "", fmt.Errorf("etcdtest: %w", err)
		}
		contents[name] = b
		fmt.Fprintf(h, "%s %d\n", name, len(b))
		h.Write(b)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "topokit-etcdtest", version+"-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, "etcd")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	src, err := os.MkdirTemp(dir, "src-")
	if err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	defer os.RemoveAll(src)
	for name, b := range contents {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return "", fmt.Errorf("etcdtest: %w", err)
		}
	}
	tmp := filepath.Join(src, "etcd")
	cmd := exec.Command("go", "build", "-tags", "etcdtestserver", "-o", tmp, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("etcdtest: building etcd server %s: %w\n%s", version, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("etcdtest: %w", err)
	}
	return bin, nil
}
