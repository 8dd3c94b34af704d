package zk2topo

import "testing"

// TestInternalPaths: internal finds the lock and election layout by
// whole segments only: "locks" at any depth, "elections" as the first
// segment, the server's own "zookeeper" on a Conn at the server's root;
// a segment that merely contains those names is a file or directory.
func TestInternalPaths(t *testing.T) {
	for _, root := range []string{"", "/r"} {
		c := &Conn{root: root}
		for p, want := range map[string]bool{
			"locks": true, "a/locks": true, "a/locks/b": true, "locks/x": true, "a/b/c/locks": true,
			"alocks": false, "locksx": false, "a/mylocks/b": false, "a/locks_b": false, "lock": false, "a/lock/s": false,
			"elections": true, "elections/x": true, "elections/x/locks": true,
			"electionsx": false, "a/elections": false, "a/elections/x": false,
			"zookeeper": root == "", "zookeeper/quota": root == "", "zookeeperx": false, "a/zookeeper": false,
			"": false, "a": false, "a/b": false,
		} {
			if got := c.internal(p); got != want {
				t.Errorf("root %q: internal(%q) = %v, want %v", root, p, got, want)
			}
		}
	}
}
