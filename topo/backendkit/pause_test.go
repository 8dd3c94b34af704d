package backendkit

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	if !Sleep(t.Context(), time.Millisecond) {
		t.Fatal("Sleep on a live context reported it ended")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Fatal("Sleep on an ended context reported it live")
	}
}

func TestSend(t *testing.T) {
	ch := make(chan int, 1)
	if !Send(t.Context(), ch, 7) || <-ch != 7 {
		t.Fatal("Send into a channel with room did not deliver")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if Send(ctx, make(chan int), 1) {
		t.Fatal("Send with nobody receiving and an ended context reported a delivery")
	}
}
