package fusefs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// opCounts is a request hook that counts by "op:ok" and "op:error".
type opCounts struct {
	mu sync.Mutex // guards m
	m  map[string]int
}

func (c *opCounts) hook(op string, failed bool) {
	k := op + ":ok"
	if failed {
		k = op + ":error"
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
	c.mu.Unlock()
}

// get returns the count of k ("op:result"); of ":result", the sum over
// the ops.
func (c *opCounts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !strings.HasPrefix(k, ":") {
		return c.m[k]
	}
	n := 0
	for op, v := range c.m {
		if strings.HasSuffix(op, k) {
			n += v
		}
	}
	return n
}

func (c *opCounts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, n := range c.m {
		out = append(out, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// TestOnRequest: Options.OnRequest learns of every FUSE request by
// operation and result: cat of a file looks it up, opens, reads and
// releases it; writing a read-only file is a failed request.
func TestOnRequest(t *testing.T) {
	vfstest.Mountable(t)
	var c opCounts
	dir := t.TempDir()
	srv, err := Mount(dir, newTestTree().root, testAuth{}, Options{Logger: vfstest.Logger(t), OnRequest: c.hook})
	if errors.Is(err, syscall.EPERM) {
		t.Skipf("cannot mount: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Unmount(); srv.Wait() }()
	if got := vfstest.Must(t, dir, `cat "$M/view"`); got != "hello\n" {
		t.Fatalf("cat view = %q", got)
	}
	if _, _, err := vfstest.Sh(dir, `echo x > "$M/view"`); err == nil {
		t.Fatal("wrote a read-only file")
	}
	// The hook runs after the reply: a release may still be on its way.
	for _, k := range []string{"lookup:ok", "open:ok", "read:ok", "release:ok", ":error"} {
		for t0 := time.Now(); c.get(k) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("no %s request counted: %s", k, &c)
			}
		}
	}
}
