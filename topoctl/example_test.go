package topoctl_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/topokit/topokit/topo"
	"github.com/topokit/topokit/topo/memorytopo"
	"github.com/topokit/topokit/topoctl"
)

// exampleStore stands for a custom backend: a Factory that some package
// of yours registers in its init. Here it wraps memorytopo under another
// name; a real one would open connections to your store.
type exampleStore struct{ mem *memorytopo.Factory }

// Create opens a Conn to the store at addr, rooted at root.
func (s exampleStore) Create(cell, addr, root string) (topo.Conn, error) {
	return s.mem.Create(cell, addr, root)
}

func init() {
	// In your backend's package. A registration that fails (a name taken
	// twice) is a programming error: stop the program.
	if err := topo.RegisterFactory("examplestore", exampleStore{mem: memorytopo.NewFactory()}); err != nil {
		panic(err)
	}
}

// A topoctl that includes a custom backend: import the backend's package
// (its init registers its factory) and call topoctl.Run from main:
//
//	func main() { os.Exit(topoctl.Run()) }
//
// Here topoctl.Main runs in-process the commands the binary would run as
// "topoctl -i examplestore -a demo --topo-global-root /example ARGS...";
// each prints its command line, then its output.
func Example() {
	ctx := context.Background()
	conn := []string{"--topo-implementation", "examplestore", "--topo-global-server-address", "demo", "--topo-global-root", "/example"}
	run := func(args ...string) {
		fmt.Println("$ topoctl", strings.Join(args, " "))
		var out bytes.Buffer
		code := topoctl.Main(ctx, append(conn, args...), nil, &out, &out)
		fmt.Println(strings.TrimSuffix(out.String(), "\n"))
		if code != topoctl.ExitOK {
			fmt.Println("exit code", code)
		}
	}
	run("put", "/keyspaces/commerce/Keyspace", "v1")
	run("ls", "/keyspaces/commerce")
	run("get", "/keyspaces/commerce/Keyspace")
	run("lock", "/keyspaces/commerce", "--", "echo", "holding the lock")
	run("copy", "--to", "examplestore:demo:/backup", "/keyspaces")
	run("--topo-global-root", "/backup", "get", "/keyspaces/commerce/Keyspace")
	// Output:
	// $ topoctl put /keyspaces/commerce/Keyspace v1
	// 1
	// $ topoctl ls /keyspaces/commerce
	// Keyspace
	// $ topoctl get /keyspaces/commerce/Keyspace
	// v1
	// $ topoctl lock /keyspaces/commerce -- echo holding the lock
	// holding the lock
	// $ topoctl copy --to examplestore:demo:/backup /keyspaces
	// copied 1 file (2 bytes) from examplestore:demo:/example under /keyspaces to examplestore:demo:/backup under /keyspaces
	// $ topoctl --topo-global-root /backup get /keyspaces/commerce/Keyspace
	// v1
}
