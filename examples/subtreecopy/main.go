// Command subtreecopy copies a subtree from one topology store to another
// and lists who holds its locks, with topokit's operation packages and no
// CLI code: topo/connect opens the stores, topo/tree lists the subtree,
// topo/copy plans and writes the copy (everything checked first, and
// everything written reverted if a write fails), and topo/inspect lists
// every held lock of the subtree with its holder and names the holder of
// one lock. A cluster manager embedding topokit does the same
// from its own code.
//
//	go run ./examples/subtreecopy \
//	    -from etcd2,127.0.0.1:2379,/vitess/global \
//	    -to zk2,127.0.0.1:2181,/vitess/global \
//	    -path /keyspaces -lock /keyspaces/commerce
//
// A store is "IMPLEMENTATION,ADDRESS,ROOT". With -overwrite, files that
// differ in the destination are replaced; without it the copy writes
// nothing when one does.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/connect"
	"github.com/topokit/topokit/topo/copy"
	"github.com/topokit/topokit/topo/inspect"
	"github.com/topokit/topokit/topo/tree"

	_ "github.com/topokit/topokit/topo/memorytopo" // registers "memory"
)

// Store names a store: implementation, address and root.
type Store struct{ Impl, Addr, Root string }

// parseStore parses "IMPL,ADDR,ROOT": the implementation ends at the
// first comma and the root starts after the last one, so that the address
// may list several servers.
func parseStore(s string) (Store, error) {
	first, last := strings.IndexByte(s, ','), strings.LastIndexByte(s, ',')
	if first < 0 || first == last {
		return Store{}, fmt.Errorf("%q: want IMPLEMENTATION,ADDRESS,ROOT", s)
	}
	return Store{s[:first], s[first+1 : last], s[last+1:]}, nil
}

// Result is what copySubtree did.
type Result struct {
	// Created, Overwritten and Identical count the files by what the copy
	// did to them; Bytes is what it wrote.
	Created, Overwritten, Identical, Bytes int
	// Skipped are the files it left alone (reserved or odd keys).
	Skipped []string
	// Locks are the locks held in the source's subtree, each with its
	// holder, parents first.
	Locks []inspect.Lock
	// Held says whether the lock asked about is held, and Holder is its
	// holder's description ("" when the holder gave none, nobody holds it
	// or none was asked about).
	Held   bool
	Holder string
}

// copySubtree copies every file under dir from the store src to dst, then
// lists the locks held under dir in src with their holders, and reads who
// holds the lock on lockDir in src (when lockDir is not "").
func copySubtree(ctx context.Context, settings connect.Settings, src, dst Store, dir, lockDir string, overwrite bool) (Result, error) {
	var res Result
	from, err := settings.Open(ctx, src.Impl, src.Addr, src.Root)
	if err != nil {
		return res, err
	}
	defer from.Close()
	to, err := settings.Open(ctx, dst.Impl, dst.Addr, dst.Root)
	if err != nil {
		return res, err
	}
	defer to.Close()

	d, err := topo.CleanDirPath(dir)
	if err != nil {
		return res, err
	}
	listing, err := tree.List(ctx, from.GlobalCell(), d)
	if err != nil {
		return res, err
	}
	res.Skipped = append(listing.Reserved, listing.Odd...)
	plan, err := copy.PlanWrites(ctx, to.GlobalCell(), d, listing.Files, copy.PlanOptions{Overwrite: overwrite})
	if err != nil {
		return res, err
	}
	if err := copy.Execute(ctx, to.GlobalCell(), plan, "copying", copy.ExecOptions{}); err != nil {
		return res, err
	}
	res.Created, res.Overwritten, res.Identical = plan.Count(copy.Create), plan.Count(copy.Overwrite), plan.Count(copy.Identical)
	res.Bytes = plan.Bytes()

	if res.Locks, err = inspect.Locks(ctx, from.GlobalCell(), d); err != nil {
		return res, err
	}
	if lockDir != "" {
		h, err := inspect.LockHolder(ctx, from.GlobalCell(), lockDir)
		switch {
		case err == nil:
			res.Held, res.Holder = true, h
		case !topo.IsErrType(err, topo.NoNode):
			return res, err
		}
	}
	return res, nil
}

// report prints res, the result of a copy that was asked about the lock
// on lockDir ("" for none).
func report(w io.Writer, res Result, lockDir string) {
	fmt.Fprintf(w, "copied %d new and %d overwritten files (%d bytes); %d already identical\n", res.Created, res.Overwritten, res.Bytes, res.Identical)
	for _, p := range res.Skipped {
		fmt.Fprintf(w, "not copied: /%s\n", p)
	}
	for _, l := range res.Locks {
		fmt.Fprintf(w, "lock on /%s: held by %q\n", l.Dir, l.Holder)
	}
	switch {
	case lockDir == "":
	case res.Held:
		fmt.Fprintf(w, "lock on %s: held by %q\n", lockDir, res.Holder)
	default:
		fmt.Fprintf(w, "lock on %s: not held\n", lockDir)
	}
}

func main() {
	fromFlag := flag.String("from", "", "source store IMPLEMENTATION,ADDRESS,ROOT")
	toFlag := flag.String("to", "", "destination store IMPLEMENTATION,ADDRESS,ROOT")
	dir := flag.String("path", "/", "the subtree to copy")
	lockDir := flag.String("lock", "", "a directory whose lock holder to name, in the source store")
	overwrite := flag.Bool("overwrite", false, "replace destination files that differ")
	flag.Parse()
	src, err := parseStore(*fromFlag)
	if err == nil {
		var dst Store
		dst, err = parseStore(*toFlag)
		if err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			var res Result
			res, err = copySubtree(ctx, connect.Settings{}, src, dst, *dir, *lockDir, *overwrite)
			if err == nil {
				report(os.Stdout, res, *lockDir)
				return
			}
		}
	}
	fmt.Fprintln(os.Stderr, "subtreecopy:", err)
	os.Exit(1)
}
