package consultopo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/backendkit"
)

// convertError maps a consul api error onto a *topo.Error for path.
func (c *Conn) convertError(ctx context.Context, err error, path string) error {
	return backendkit.MapError(ctx, err, path, c.ctx.Err() != nil, codeOf)
}

// codeOf is convertError's Consul part (backendkit.MapError's).
func codeOf(err error) topo.ErrorCode {
	if errors.Is(err, context.DeadlineExceeded) {
		return topo.Timeout
	}
	if errors.Is(err, context.Canceled) {
		return topo.Interrupted
	}
	if isPermissionDenied(err) {
		return topo.PermissionDenied
	}
	var se api.StatusError
	if errors.As(err, &se) {
		switch se.Code {
		case http.StatusNotFound:
			return topo.NoNode
		case http.StatusConflict:
			return topo.BadVersion
		case http.StatusTooManyRequests:
			return topo.ResourceExhausted
		case http.StatusRequestEntityTooLarge, http.StatusBadRequest:
			return topo.InvalidArgument
		}
	}
	return topo.Unavailable
}

// Consul's ACL refusals (HTTP 403 bodies, transactions' per-operation
// errors): a refused operation, and an unknown token.
const permissionDenied = "Permission denied"
const aclNotFound = "ACL not found"

// isPermissionDenied reports whether err is an ACL refusal (some come as
// "Unexpected response code: 403").
func isPermissionDenied(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, permissionDenied) || strings.Contains(msg, aclNotFound) || strings.Contains(msg, "response code: 403")
}

// errFilteredByACLs stands for a listing Consul answered without error but
// without the keys the token may not read, as if they did not exist
// (X-Consul-Results-Filtered-By-ACLs), where etcd and ZooKeeper refuse the
// read. Its text holds permissionDenied: PermissionDenied, permanent.
var errFilteredByACLs = errors.New(permissionDenied + ": the ACL token may not read some keys under this prefix (Consul left them out of the listing)")

// unfiltered is err, or errFilteredByACLs when the listing meta answers
// left keys out for the token.
func unfiltered(meta *api.QueryMeta, err error) error {
	if err == nil && meta != nil && meta.ResultsFilteredByACLs {
		return errFilteredByACLs
	}
	return err
}

// isPermanent reports whether a retry loop must give up on err at once.
func isPermanent(err error) bool {
	return isPermissionDenied(err) || topo.IsErrType(err, topo.PermissionDenied)
}

// rollback is why Consul rolled a transaction back, read from its
// per-operation errors (agent/consul/state/txn.go, the endpoint's ACL and
// lock-delay checks).
type rollback int

const (
	rollbackUnknown    rollback = iota // no error, or one not recognised below
	rollbackDenied                     // an ACL refusal
	rollbackStale                      // a check-and-set or index check saw another index
	rollbackMissing                    // a get, index check or session check found no key
	rollbackExists                     // check-not-exists found the key
	rollbackHeld                       // lock: another session holds the key
	rollbackLockDelay                  // lock: a lock-delay is in effect
	rollbackNotHeld                    // session check: the key is held by another session, or none
	rollbackBadSession                 // lock: the session does not exist
)

// classifyRollback returns rollbackDenied when any operation was refused
// by an ACL, else the kind of the first per-operation error.
func classifyRollback(resp *api.TxnResponse) rollback {
	if resp == nil || len(resp.Errors) == 0 {
		return rollbackUnknown
	}
	for _, e := range resp.Errors {
		what := unquoted(e.What)
		if strings.Contains(what, permissionDenied) || strings.Contains(what, aclNotFound) {
			return rollbackDenied
		}
	}
	return rollbackOf(resp.Errors[0].What)
}

// rollbackOf returns the kind of Consul's message what (for an ACL
// refusal, rollbackUnknown).
func rollbackOf(what string) rollback {
	switch what = unquoted(what); {
	case strings.Contains(what, "index is stale"), strings.Contains(what, "failed index check"):
		return rollbackStale
	case strings.Contains(what, "doesn't exist"):
		return rollbackMissing
	case strings.Contains(what, "lock is already held"):
		return rollbackHeld
	case strings.Contains(what, "due to lock delay"):
		return rollbackLockDelay
	case strings.Contains(what, "failed session check"):
		return rollbackNotHeld
	case strings.Contains(what, "invalid session"), strings.Contains(what, "Invalid session"):
		return rollbackBadSession
	case strings.HasSuffix(what, " exists"):
		return rollbackExists
	}
	return rollbackUnknown
}

// unquoted returns what without the keys it quotes (%q), so that a key
// named like a message ("x/index is stale") never reads as one.
func unquoted(what string) string {
	var b strings.Builder
	for {
		i := strings.IndexByte(what, '"')
		q, err := strconv.QuotedPrefix(what[max(i, 0):])
		if i < 0 || err != nil {
			return b.String() + what
		}
		b.WriteString(what[:i] + `""`)
		what = what[i+len(q):]
	}
}

// rollbackError is the error of an unexpected rollback: PermissionDenied
// for an ACL refusal, else Unavailable naming Consul's message.
func rollbackError(path string, resp *api.TxnResponse) error {
	code, err := topo.Unavailable, errors.New("transaction rolled back")
	if classifyRollback(resp) == rollbackDenied {
		code = topo.PermissionDenied
	}
	if resp != nil && len(resp.Errors) > 0 {
		err = fmt.Errorf("transaction rolled back: %s", resp.Errors[0].What)
	}
	return backendkit.Wrap(code, path, err)
}
