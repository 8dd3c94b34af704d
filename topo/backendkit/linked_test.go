package backendkit

import (
	"context"
	"testing"
)

func TestLinked(t *testing.T) {
	other, end := context.WithCancel(t.Context())
	ctx, cancel := Linked(t.Context(), other)
	defer cancel()
	if ctx.Err() != nil {
		t.Fatal("a linked context of two live ones has ended")
	}
	end()
	<-ctx.Done() // ends with other

	parent, endParent := context.WithCancel(t.Context())
	ctx, cancel = Linked(parent, t.Context())
	defer cancel()
	endParent()
	<-ctx.Done() // ends with its parent

	ctx, cancel = Linked(t.Context(), t.Context())
	cancel()
	if ctx.Err() == nil {
		t.Fatal("cancel did not end the linked context")
	}
}
