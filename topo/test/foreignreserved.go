package test

import (
	"context"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// ForeignReservedConn wraps a Conn so that its List acts as if another
// tool had written files at reserved paths: a file with a
// "foreign-locks" segment stands for one at the same path with "locks"
// (which topokit refuses to write); List leaves it out and reports it in
// the PartialResult error of backendkit.ReservedFiles, as the List
// contract says for such files. For tests of tools built on List (copy,
// diff, the web page). Safe for concurrent use if conn is.
type ForeignReservedConn struct{ topo.Conn }

// List implements topo.Conn (see ForeignReservedConn).
func (c ForeignReservedConn) List(ctx context.Context, prefix string) ([]topo.KVInfo, error) {
	kvs, err := c.Conn.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	var rest []topo.KVInfo
	var reserved []string
	for _, kv := range kvs {
		if strings.Contains("/"+kv.Path+"/", "/foreign-locks/") {
			reserved = append(reserved, strings.ReplaceAll(kv.Path, "foreign-locks", backendkit.LocksDirName))
			continue
		}
		rest = append(rest, kv)
	}
	return rest, backendkit.ReservedFiles(prefix, reserved)
}
