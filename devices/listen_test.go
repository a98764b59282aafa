package devices

import (
	"context"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
)

// flakyListener is a listener whose Accept fails with err the first fails
// times, as accept(2) does when the process is out of descriptors.
type flakyListener struct {
	net.Listener
	fails atomic.Int32
	err   error
}

func (l *flakyListener) Accept() (net.Conn, error) {
	if l.fails.Add(-1) >= 0 {
		return nil, l.err
	}
	return l.Listener.Accept()
}

// TestSplitListenerAcceptErrors: errors of Accept that pass (out of
// descriptors, a connection aborted) do not end the split listener: it
// pauses and accepts again, and the next 9P client is served.
func TestSplitListenerAcceptErrors(t *testing.T) {
	e := kerneltest.Open(t)
	r, err := New(e.K, Options{Local: local.Options{Logger: kerneltest.Quiet()}, Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ECONNABORTED} {
		t.Run(errno.Error(), func(t *testing.T) {
			tl, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			fl := &flakyListener{Listener: tl, err: &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", errno)}}
			fl.fails.Store(5)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sl := r.SplitListener(ctx, fl, time.Second)
			defer sl.Close()
			go func() {
				c, err := net.Dial("tcp", tl.Addr().String())
				if err == nil {
					c.Write([]byte{19, 0, 0, 0}) // a 9P client's first bytes
					defer c.Close()
					<-ctx.Done()
				}
			}()
			got := make(chan error, 1)
			go func() {
				c, err := sl.Accept()
				if c != nil {
					c.Close()
				}
				got <- err
			}()
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("Accept after %d %v errors: %v", 5, errno, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("no connection accepted after %d %v errors", 5, errno)
			}
		})
	}
}
