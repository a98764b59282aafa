package ninep

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"9fans.net/go/plan9"

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

func (c *opCounts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
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

// TestOnRequest: Server.OnRequest learns of every request answered, by
// message type and result: a session's version and attach, a read's
// walk, open, read and clunk, a missing file's failed walk.
func TestOnRequest(t *testing.T) {
	var c opCounts
	tt := newTestTree()
	sock := serveUnix(t, &Server{Root: tt.root, Auth: testAuth{}, OnRequest: c.hook})
	fsys, err := Mount("unix!"+sock, "glenda", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fsys.Close()
	if got := vfstest.ReadFile(t, fsys, "view"); got != "hello\n" {
		t.Fatalf("view = %q", got)
	}
	if _, err := fsys.Open("nope", plan9.OREAD); err == nil {
		t.Fatal("opened a missing file")
	}
	// The hook runs once the reply is sent: wait for it.
	for _, k := range []string{"version:ok", "attach:ok", "walk:ok", "walk:error", "open:ok", "read:ok", "clunk:ok"} {
		for t0 := time.Now(); c.get(k) == 0; time.Sleep(10 * time.Millisecond) {
			if time.Since(t0) > 30*time.Second {
				t.Fatalf("no %s request counted: %s", k, &c)
			}
		}
	}
}
