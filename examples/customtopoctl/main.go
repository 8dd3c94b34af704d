// Command customtopoctl is topoctl with one more backend built in: the
// template backend of examples/templatetopo, registered as "template". It
// is the whole of a custom topoctl: one import of the backend (whose init
// registers its factory) and one main calling the public topoctl package.
// Build your own the same way, importing your backend instead:
//
//	go build -o mytopoctl ./examples/customtopoctl
//	./mytopoctl --help    # lists "template" among the backends
//	./mytopoctl -i template -a demo --topo-global-root /r put /a/f v
//
// The template keeps its store in the process, so each run of the binary
// starts empty; main_test.go runs a sequence of commands in one process
// (topoctl.Main) to show ls, get, put, lock and copy working on it.
package main

import (
	"os"

	_ "github.com/topokit/topokit/examples/templatetopo" // registers "template"
	"github.com/topokit/topokit/topoctl"
)

func main() { os.Exit(topoctl.Run()) }
