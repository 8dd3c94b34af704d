// Package copy plans and carries out writes of whole trees into a topology
// store, with a true revert: copies between two stores, imports from and
// exports to a local directory, recursive deletes, and the comparison of
// two trees (Compare).
//
// A write is planned first (PlanWrites): every path, every size and the
// destination are checked before anything is written, and files the
// destination already holds byte for byte are skipped. Execute then makes
// the writes, several at a time and in batches (one Conn.Txn each, with
// the same conditions as single writes); when a write fails or ctx ends,
// no new write starts, the writes in flight run to their answer, and
// everything the run wrote is reverted, each file only if nobody changed
// it since. The *ExecError says what, if anything, is left.
//
// The package holds no command-line code: it takes Conns, a context and
// plain options, returns values and typed errors (topo.Error codes, and
// *ExecError, *DeleteError, *ExportError), and reports progress through
// the Progress interface. Every function is safe for concurrent use with
// distinct arguments. Backend differences are handled inside: on
// ZooKeeper a batch also creates the directories of its files that the
// destination did not hold when planned (zk2topo.DirectoriesAbsent), in
// the same multi; an empty file with files below it, which ZooKeeper
// cannot store, fails the plan; and a file with files below it is deleted
// (rm -R, PlanOptions.Delete, a revert) only once the files below it that
// go too are gone, so that no emptied znode is left behind to read as an
// empty file.
package copy
