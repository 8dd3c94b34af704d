package ui

import (
	"context"
	"net"
)

// CheckListenResolving is CheckListen resolving localhost with lookup.
func CheckListenResolving(addr string, tls, insecure bool, lookup func(ctx context.Context, host string) ([]net.IPAddr, error)) error {
	return checkListen(addr, tls, insecure, lookup)
}
