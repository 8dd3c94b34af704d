package memorytopo

import (
	"context"
	"testing"
)

// TestOwnLeaseEndsWithItsEntry: the lease of a LockWithTTL or LockName
// lock ends when its entry goes (removeEntry), so unlocking leaves no
// lease behind; the Conn's session outlives its entries.
func TestOwnLeaseEndsWithItsEntry(t *testing.T) {
	ctx := context.Background()
	c, err := NewFactory().NewConn("", "/r")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Create(ctx, "d/f", []byte("v")); err != nil {
		t.Fatal(err)
	}
	leases := func() (conn, store int) {
		c.s.mu.Lock()
		defer c.s.mu.Unlock()
		return len(c.leases), len(c.s.leases)
	}
	lt, err := c.LockWithTTL(ctx, "d", "ttl", DefaultSessionTTL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := c.LockName(ctx, "n", "named")
	if err != nil {
		t.Fatal(err)
	}
	if a, b := leases(); a != 2 || b != 2 {
		t.Fatalf("leases while held: Conn %d, store %d; want 2, 2", a, b)
	}
	for _, ld := range []interface{ Unlock(context.Context) error }{lt, ln} {
		if err := ld.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := leases(); a != 0 || b != 0 {
		t.Fatalf("leases after Unlock: Conn %d, store %d; want 0, 0", a, b)
	}
	l, err := c.Lock(ctx, "d", "session")
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := leases(); a != 1 || b != 1 {
		t.Fatalf("after a Lock's Unlock: Conn %d, store %d leases; want the session: 1, 1", a, b)
	}
}
