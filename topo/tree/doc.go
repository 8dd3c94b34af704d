// Package tree walks a subtree of a topology store through any topo.Conn:
// every file at or under a directory in one List (List), and the entries
// of a directory with their descendants through ListDir (Entries).
//
// It holds no command-line code: it takes a Conn, a context and plain
// options and returns values and typed errors (topo.Error codes), which
// topoctl, the Go programs that embed topokit and a web UI share. Files
// that a tree operation cannot carry over are reported, never dropped
// silently: those at reserved paths (topo.IsReserved, written by another
// tool) and those under keys that are no canonical path ("a//b", "t/").
//
// The functions are safe for concurrent use; they behave alike on every
// backend, since they use only the Conn contract.
package tree
