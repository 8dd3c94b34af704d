package topoctl

import (
	"errors"
	"os"
	"path/filepath"
)

// defaultDataDir returns where `topoctl serve` keeps the embedded etcd's
// data by default: $TOPOCTL_DATA_DIR if set, else
// $XDG_DATA_HOME/topokit/etcd, else $HOME/.local/share/topokit/etcd, else
// (no home) the user cache directory's topokit/etcd. The data survives
// restarts of serve.
func defaultDataDir(getenv func(string) string) (string, error) {
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	if d := getenv(envDataDir); d != "" {
		return d, nil
	}
	if d := getenv("XDG_DATA_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "topokit", "etcd"), nil
	}
	if h := getenv("HOME"); h != "" {
		return filepath.Join(h, ".local", "share", "topokit", "etcd"), nil
	}
	if c, err := os.UserCacheDir(); err == nil {
		return filepath.Join(c, "topokit", "etcd"), nil
	}
	return "", errors.New("no data directory: set --data-dir, " + envDataDir + " or HOME")
}

// endpointFile is the file in serve's data directory that records the
// client address it listens on, so that other commands find it with no
// flags. It stays when serve stops: commands then fail against that
// address and suggest starting serve, rather than trying another one.
func endpointFile(dataDir string) string {
	return filepath.Join(dataDir, "topoctl-client-address")
}
