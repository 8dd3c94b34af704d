package claims

import (
	"context"
	"testing"
)

// TestGraceContextEnd: a grace context lives until its deadline or its
// end, and contexts derived from it (context.WithCancel, through its
// AfterFunc) end with it, whether they were derived before or after.
func TestGraceContextEnd(t *testing.T) {
	g := newGrace()
	if _, ok := g.Deadline(); !ok || g.Err() != nil {
		t.Fatalf("new grace context: deadline set %v, Err %v", ok, g.Err())
	}
	before, cancel := context.WithCancel(g)
	defer cancel()
	stopped := context.AfterFunc(g, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Fatal("AfterFunc's stop did not stop it")
	}
	g.end()
	<-g.Done()
	<-before.Done()
	after, cancel2 := context.WithCancel(g)
	defer cancel2()
	<-after.Done()
	if g.Err() != context.DeadlineExceeded || before.Err() == nil {
		t.Fatalf("ended grace context: Err %v, derived Err %v", g.Err(), before.Err())
	}
}
