package notify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// fakeClock is a clock the tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// harness is kerneltest's kernel (root; alice, host uid 1001; bob, host
// uid 1002) with the notification room on a fake clock.
type harness struct {
	t                *testing.T
	k                *kernel.Kernel
	space            *ns.Space
	r                *Room
	clock            *fakeClock
	root, alice, bob *kernel.Caller
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newHarness(t *testing.T, opts Options) *harness {
	t.Helper()
	k := kerneltest.Open(t).K
	clock := &fakeClock{t: t0}
	opts.Now = clock.Now
	opts.Logger = kerneltest.Quiet()
	if opts.PruneEvery == 0 {
		opts.PruneEvery = -1
	}
	space := ns.New(k)
	r, err := Open(space, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { space.Close() }) // before kerneltest closes the kernel
	// The identities are made after Open, whose migration grants the
	// users group notification.*.
	return &harness{t: t, k: k, space: space, r: r, clock: clock,
		root:  kerneltest.Caller(kerneltest.Host(t, k, 0)),
		alice: kerneltest.Caller(kerneltest.Host(t, k, 1001)),
		bob:   kerneltest.Caller(kerneltest.Host(t, k, 1002))}
}

func (h *harness) create(c *kernel.Caller, a *abi.NotificationCreateArgs) *abi.Notification {
	h.t.Helper()
	res, err := kernel.Do(context.Background(), h.k, c, abi.NotificationCreate, a)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Notification
}

func (h *harness) list(c *kernel.Caller, a *abi.NotificationListArgs) []abi.Notification {
	h.t.Helper()
	if a == nil {
		a = &abi.NotificationListArgs{}
	}
	res, err := kernel.Do(context.Background(), h.k, c, abi.NotificationList, a)
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Notifications
}

func (h *harness) byID(c *kernel.Caller, call abi.Call[abi.NotificationIDArgs, *abi.NotificationResult], id string) *abi.Notification {
	h.t.Helper()
	res, err := kernel.Do(context.Background(), h.k, c, call, &abi.NotificationIDArgs{NotificationID: id})
	if err != nil {
		h.t.Fatal(err)
	}
	return res.Notification
}

// rows counts the stored notifications, expired or not.
func (h *harness) rows() int {
	h.t.Helper()
	var n int
	if err := h.k.Store.QueryRowContext(context.Background(), `SELECT count(*) FROM notify_notifications`).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

func ptr[T any](v T) *T { return &v }

const day = 24 * time.Hour

func ms(d time.Duration) int64 { return d.Milliseconds() }

// TestExpiryArithmetic checks the pure rules: a create's expiry and a
// list's limit.
func TestExpiryArithmetic(t *testing.T) {
	for _, c := range []struct {
		name string
		ttl  *int64
		want time.Duration
	}{
		{"default", nil, 30 * day},
		{"in range", ptr(ms(time.Hour)), time.Hour},
		{"clamp low", ptr(int64(500)), time.Second},
		{"zero", ptr(int64(0)), time.Second},
		{"negative", ptr(int64(-1 << 62)), time.Second},
		{"clamp high", ptr(ms(100 * day)), 90 * day},
		{"huge", ptr(int64(1<<63 - 1)), 90 * day},
		{"exactly max", ptr(ms(90 * day)), 90 * day},
		{"exactly min", ptr(int64(1000)), time.Second},
	} {
		if got := expiryOf(t0, c.ttl); got != t0.Add(c.want).UnixMilli() {
			t.Errorf("%s: expiry %d, want now+%v", c.name, got-t0.UnixMilli(), c.want)
		}
	}
	for _, c := range []struct {
		limit *int
		want  int
	}{{nil, 100}, {ptr(0), 1}, {ptr(-7), 1}, {ptr(1), 1}, {ptr(42), 42}, {ptr(500), 500}, {ptr(501), 500}, {ptr(1 << 40), 500}} {
		if got := limitOf(c.limit); got != c.want {
			t.Errorf("limit %v: %d, want %d", c.limit, got, c.want)
		}
	}
}

// TestTTL drives the TTL rules through the dispatcher on the fake clock:
// a create's expiry, mark_read's now+7d, dismiss's now+3d, and expiry
// hiding a notification from every call.
func TestTTL(t *testing.T) {
	for _, c := range []struct {
		name   string
		ttl    *int64
		after  time.Duration // the clock moves this much before the action
		action string        // "", "read", "dismiss", "read+dismiss", "dismiss+read"
		want   time.Duration // expiry, from the action's time
	}{
		{"default", nil, 0, "", 30 * day},
		{"custom", ptr(ms(2 * time.Hour)), 0, "", 2 * time.Hour},
		{"clamp low", ptr(int64(1)), 0, "", time.Second},
		{"clamp high", ptr(ms(365 * day)), 0, "", 90 * day},
		{"read", nil, 10 * day, "read", 7 * day},
		{"read extends a short ttl", ptr(ms(time.Hour)), 30 * time.Minute, "read", 7 * day},
		{"dismiss", nil, 5 * day, "dismiss", 3 * day},
		{"dismiss after read", nil, day, "read+dismiss", 3 * day},
		{"read after dismiss keeps the dismissal's", nil, day, "dismiss+read", 3 * day},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, Options{})
			n := h.create(h.alice, &abi.NotificationCreateArgs{Title: "t", TtlMs: c.ttl})
			h.clock.advance(c.after)
			at := h.clock.Now()
			for _, act := range strings.Split(c.action, "+") {
				switch act {
				case "read":
					n = h.byID(h.alice, abi.NotificationMarkRead, n.NotificationID)
					if n == nil || n.ReadAt == nil || *n.ReadAt != at.UnixMilli() {
						t.Fatalf("mark_read: %+v", n)
					}
				case "dismiss":
					n = h.byID(h.alice, abi.NotificationDismiss, n.NotificationID)
					if n == nil || n.DismissedAt == nil || *n.DismissedAt != at.UnixMilli() {
						t.Fatalf("dismiss: %+v", n)
					}
				}
			}
			if want := at.Add(c.want).UnixMilli(); *n.ExpiresAt != want {
				t.Fatalf("expiresAt now+%v, want now+%v", time.Duration(*n.ExpiresAt-at.UnixMilli())*time.Millisecond, c.want)
			}
			all := &abi.NotificationListArgs{IncludeDismissed: ptr(true)}
			// A millisecond before expiry it is there; at expiry it is gone.
			h.clock.advance(c.want - time.Millisecond)
			if got := h.list(h.alice, all); len(got) != 1 {
				t.Fatalf("just before expiry: %d listed", len(got))
			}
			h.clock.advance(time.Millisecond)
			if got := h.list(h.alice, all); len(got) != 0 {
				t.Fatalf("at expiry: %+v listed", got)
			}
			if got := h.byID(h.alice, abi.NotificationMarkRead, n.NotificationID); got != nil {
				t.Fatalf("mark_read of an expired notification: %+v", got)
			}
			if got := h.byID(h.alice, abi.NotificationDismiss, n.NotificationID); got != nil {
				t.Fatalf("dismiss of an expired notification: %+v", got)
			}
		})
	}
}

// TestReadsAreFree: a list never deletes an expired row; the next write
// does.
func TestReadsAreFree(t *testing.T) {
	h := newHarness(t, Options{})
	h.create(h.alice, &abi.NotificationCreateArgs{Title: "short", TtlMs: ptr(int64(1000))})
	h.clock.advance(2 * time.Second)
	if got := h.list(h.alice, nil); len(got) != 0 {
		t.Fatalf("expired notification listed: %+v", got)
	}
	if _, err := kernel.Do(context.Background(), h.k, h.alice, abi.NotificationFiles, &FilesArgs{Uid: h.alice.Uid}); err != nil {
		t.Fatal(err)
	}
	if n := h.rows(); n != 1 {
		t.Fatalf("a read deleted: %d rows", n)
	}
	h.create(h.bob, &abi.NotificationCreateArgs{Title: "next"}) // any user's write prunes
	if n := h.rows(); n != 1 {
		t.Fatalf("after a write: %d rows, want bob's only", n)
	}
}

// TestJanitor: the janitor deletes expired rows, and Close stops it.
func TestJanitor(t *testing.T) {
	h := newHarness(t, Options{PruneEvery: 5 * time.Millisecond})
	h.create(h.alice, &abi.NotificationCreateArgs{Title: "short", TtlMs: ptr(int64(1000))})
	h.create(h.alice, &abi.NotificationCreateArgs{Title: "long"})
	h.clock.advance(time.Minute)
	deadline := time.Now().Add(time.Minute)
	for h.rows() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("janitor left %d rows", h.rows())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := h.r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestListFilters: includeRead, includeDismissed, newest first, and the
// limit's clamps.
func TestListFilters(t *testing.T) {
	h := newHarness(t, Options{})
	var ids []string
	for i := 0; i < 3; i++ {
		ids = append(ids, h.create(h.alice, &abi.NotificationCreateArgs{Title: "n"}).NotificationID)
		h.clock.advance(time.Second)
	}
	h.byID(h.alice, abi.NotificationMarkRead, ids[0])
	h.byID(h.alice, abi.NotificationDismiss, ids[1])
	idsOf := func(ns []abi.Notification) string {
		var out []string
		for _, n := range ns {
			out = append(out, n.NotificationID)
		}
		return strings.Join(out, ",")
	}
	for _, c := range []struct {
		name string
		args *abi.NotificationListArgs
		want []string
	}{
		{"defaults", nil, []string{ids[2], ids[0]}},
		{"unread only", &abi.NotificationListArgs{IncludeRead: ptr(false)}, []string{ids[2]}},
		{"dismissed too", &abi.NotificationListArgs{IncludeDismissed: ptr(true)}, []string{ids[2], ids[1], ids[0]}},
		{"limit 1", &abi.NotificationListArgs{IncludeDismissed: ptr(true), Limit: ptr(1)}, []string{ids[2]}},
		{"limit 0 is 1", &abi.NotificationListArgs{Limit: ptr(0)}, []string{ids[2]}},
		{"limit -5 is 1", &abi.NotificationListArgs{Limit: ptr(-5)}, []string{ids[2]}},
	} {
		if got := idsOf(h.list(h.alice, c.args)); got != strings.Join(c.want, ",") {
			t.Errorf("%s: %s, want %s", c.name, got, strings.Join(c.want, ","))
		}
	}
}

// TestLimitClamp: a list returns at most 100 by default and 500 at most.
func TestLimitClamp(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := 0; i < 510; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.k.Call(ctx, h.alice, "notification.create", &abi.NotificationCreateArgs{Title: "n"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, c := range []struct {
		limit *int
		want  int
	}{{nil, 100}, {ptr(499), 499}, {ptr(500), 500}, {ptr(501), 500}, {ptr(100000), 500}} {
		if got := len(h.list(h.alice, &abi.NotificationListArgs{Limit: c.limit})); got != c.want {
			t.Errorf("limit %v: %d listed, want %d", c.limit, got, c.want)
		}
	}
}

// TestPerUserCap: a user keeps at most MaxPerUser notifications; a create
// beyond it deletes the oldest.
func TestPerUserCap(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	first := h.create(h.alice, &abi.NotificationCreateArgs{Title: "first"})
	h.clock.advance(time.Millisecond)
	var wg sync.WaitGroup
	for i := 0; i < MaxPerUser; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.k.Call(ctx, h.alice, "notification.create", &abi.NotificationCreateArgs{Title: "n"}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := h.rows(); n != MaxPerUser {
		t.Fatalf("%d rows, want %d", n, MaxPerUser)
	}
	if got := h.byID(h.alice, abi.NotificationMarkRead, first.NotificationID); got != nil {
		t.Fatalf("the oldest survived the cap: %+v", got)
	}
}

// TestPerUser: nobody sees or changes another's notifications, root
// included (through the syscalls); root may read any user's files.
func TestPerUser(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	n := h.create(h.alice, &abi.NotificationCreateArgs{Title: "alice's"})
	for _, c := range []*kernel.Caller{h.bob, h.root} {
		if got := h.list(c, &abi.NotificationListArgs{IncludeDismissed: ptr(true)}); len(got) != 0 {
			t.Errorf("uid %d lists alice's: %+v", c.Uid, got)
		}
		for _, call := range []abi.Call[abi.NotificationIDArgs, *abi.NotificationResult]{abi.NotificationMarkRead, abi.NotificationDismiss} {
			if got := h.byID(c, call, n.NotificationID); got != nil {
				t.Errorf("uid %d: %s of alice's id: %+v", c.Uid, call.Name, got)
			}
		}
	}
	if got := h.list(h.alice, nil); len(got) != 1 || got[0].ReadAt != nil || got[0].DismissedAt != nil {
		t.Fatalf("alice's changed: %+v", got)
	}
	_, err := kernel.Do(ctx, h.k, h.bob, abi.NotificationFiles, &FilesArgs{Uid: h.alice.Uid})
	if abi.KindOf(err) != abi.Permission {
		t.Errorf("bob reads alice's files: %v", err)
	}
	if got, err := kernel.Do(ctx, h.k, h.root, abi.NotificationFile, &FilesArgs{Uid: h.alice.Uid, ID: n.NotificationID}); err != nil || got.Title != "alice's" {
		t.Errorf("root reads alice's file: %+v %v", got, err)
	}
}

// TestSource: a caller acting as a process makes a process notification.
func TestSource(t *testing.T) {
	h := newHarness(t, Options{})
	if n := h.create(h.alice, &abi.NotificationCreateArgs{Title: "u"}); n.Source != (abi.NotificationSource{Kind: "user"}) {
		t.Errorf("user source: %+v", n.Source)
	}
	id := *h.alice.Identity
	id.Pid = "0000cafe-0001"
	n := h.create(&kernel.Caller{Identity: &id}, &abi.NotificationCreateArgs{Title: "p"})
	if n.Source != (abi.NotificationSource{Kind: "process", ProcessID: "0000cafe-0001"}) {
		t.Errorf("process source: %+v", n.Source)
	}
	if got := h.list(h.alice, nil); len(got) != 2 || got[0].Source.ProcessID != "0000cafe-0001" {
		t.Errorf("listed: %+v", got)
	}
}

// TestBadInput: every fault is a 400 naming notification.create (or the
// call), and nothing is stored.
func TestBadInput(t *testing.T) {
	h := newHarness(t, Options{})
	ctx := context.Background()
	act := func(kind, label string) map[string]any { return map[string]any{"kind": kind, "label": label} }
	nine := make([]any, 9)
	for i := range nine {
		nine[i] = act("open", "Open")
	}
	for _, c := range []struct {
		name string
		call string
		args string
		want string
	}{
		{"no title", "notification.create", `{}`, "title is required"},
		{"blank title", "notification.create", `{"title":"  "}`, "title is required"},
		{"long title", "notification.create", `{"title":"` + strings.Repeat("x", 257) + `"}`, "title is 257 bytes"},
		{"newline in title", "notification.create", `{"title":"a\nb"}`, "control character"},
		{"bad level", "notification.create", `{"title":"t","level":"loud"}`, `level "loud"`},
		{"ESC in body", "notification.create", `{"title":"t","body":"\u001b[2J"}`, "body has a control character"},
		{"huge body", "notification.create", `{"title":"t","body":"` + strings.Repeat("b", 16<<10+1) + `"}`, "body is"},
		{"unknown field", "notification.create", `{"title":"t","colour":"red"}`, `unknown field "colour"`},
		{"wrong type", "notification.create", `{"title":7}`, "bad args"},
		{"too many actions", "notification.create", mustJSON(map[string]any{"title": "t", "actions": nine}), "9 actions"},
		{"action without kind", "notification.create", mustJSON(map[string]any{"title": "t", "actions": []any{act("", "x")}}), "actions[0].kind is required"},
		{"action without label", "notification.create", mustJSON(map[string]any{"title": "t", "actions": []any{act("x", " ")}}), "actions[0].label is required"},
		{"action field unknown", "notification.create", `{"title":"t","actions":[{"kind":"a","label":"b","icon":"c"}]}`, `unknown field "icon"`},
		{"huge action args", "notification.create", mustJSON(map[string]any{"title": "t", "actions": []any{map[string]any{"kind": "a", "label": "b", "args": map[string]any{"x": strings.Repeat("y", 9000)}}}}), "actions[0].args is"},
		{"list unknown field", "notification.list", `{"all":true}`, `unknown field "all"`},
		{"mark_read without id", "notification.mark_read", `{}`, "notificationId is required"},
		{"dismiss with a newline", "notification.dismiss", `{"notificationId":"a\nb"}`, "control character"},
	} {
		_, err := h.k.Call(ctx, h.alice, c.call, json.RawMessage(c.args))
		if abi.KindOf(err) != abi.Invalid || !strings.HasPrefix(err.Error(), c.call+": ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want 400 %s: ...%s", c.name, err, c.call, c.want)
		}
	}
	if n := h.rows(); n != 0 {
		t.Fatalf("bad input stored %d notifications", n)
	}
	// Normalized: trimmed, level defaulted, empty args dropped.
	res, err := h.k.Call(ctx, h.alice, "notification.create", json.RawMessage(`{"title":" hi ","actions":[{"kind":" open ","label":"Open","target":" /home ","args":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	n := res.(*abi.NotificationCreateResult).Notification
	b, _ := json.Marshal(n.Actions)
	if n.Title != "hi" || n.Level != "info" || string(b) != `[{"kind":"open","label":"Open","target":"/home"}]` {
		t.Errorf("normalized: %+v %s", n, b)
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestSignals: created, updated and dismissed reach the owner (and root),
// never another user.
func TestSignals(t *testing.T) {
	h := newHarness(t, Options{})
	subA := h.k.Subscribe(h.alice.Identity, nil)
	defer subA.Close()
	subB := h.k.Subscribe(h.bob.Identity, nil)
	defer subB.Close()
	n := h.create(h.alice, &abi.NotificationCreateArgs{Title: "sig"})
	h.byID(h.alice, abi.NotificationMarkRead, n.NotificationID)
	h.byID(h.alice, abi.NotificationDismiss, n.NotificationID)
	h.byID(h.bob, abi.NotificationDismiss, n.NotificationID) // not found: no signal
	for _, want := range []string{"notification.created", "notification.updated", "notification.dismissed"} {
		rec, ok := subA.Poll()
		if !ok {
			t.Fatalf("alice got no %s", want)
		}
		var f abi.SignalFrame
		if err := json.Unmarshal(rec, &f); err != nil || f.Signal != want || !strings.Contains(string(rec), n.NotificationID) {
			t.Fatalf("alice's record %s, want %s", rec, want)
		}
	}
	if rec, ok := subA.Poll(); ok {
		t.Errorf("alice got more: %s", rec)
	}
	if rec, ok := subB.Poll(); ok {
		t.Errorf("bob saw %s", rec)
	}
}

// cred is the credential of host uid over FUSE.
func (h *harness) cred(hostUID int) vfs.Cred {
	h.t.Helper()
	c, err := h.space.Authenticate(context.Background(), vfs.Peer{Transport: "fuse", HostUID: hostUID, HostGID: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// walk finds the node at the namespace path p as cred.
func (h *harness) walk(cred vfs.Cred, p string) (vfs.Node, error) {
	var n vfs.Node = h.space.Root()
	for _, name := range strings.Split(strings.Trim(p, "/"), "/") {
		d, ok := n.(vfs.Dir)
		if !ok {
			return nil, vfs.ErrNotDir
		}
		var err error
		if n, err = d.Lookup(context.Background(), cred, name); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (h *harness) ls(cred vfs.Cred, p string) ([]string, error) {
	n, err := h.walk(cred, p)
	if err != nil {
		return nil, err
	}
	ents, err := n.(vfs.Dir).ReadDir(context.Background(), cred)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name)
	}
	return out, nil
}

func (h *harness) cat(cred vfs.Cred, p string) (string, error) {
	n, err := h.walk(cred, p)
	if err != nil {
		return "", err
	}
	f := n.(vfs.File)
	hd, err := f.Open(context.Background(), cred, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer hd.Close(context.Background())
	var b []byte
	buf := make([]byte, 4096)
	for off := int64(0); ; {
		n, err := hd.Read(context.Background(), buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if n == 0 {
			return string(b), nil
		}
		b = append(b, buf[:n]...)
		off += int64(n)
	}
}

func (h *harness) ctl(cred vfs.Cred, line string) error {
	n, err := h.walk(cred, "/var/notify/ctl")
	if err != nil {
		return err
	}
	hd, err := n.(vfs.File).Open(context.Background(), cred, os.O_WRONLY)
	if err != nil {
		return err
	}
	_, werr := hd.Write(context.Background(), []byte(line+"\n"), 0)
	cerr := hd.Close(context.Background())
	return errors.Join(werr, cerr)
}

// TestFiles: /var/notify/<user> lists the user's live notifications,
// each file renders one, only the user and root may look, and the ctl
// file's lines are the syscalls.
func TestFiles(t *testing.T) {
	h := newHarness(t, Options{})
	alice, bob, root := h.cred(1001), h.cred(1002), h.cred(0)
	if err := h.ctl(alice, `create title='build finished' body='all green' level=success`); err != nil {
		t.Fatal(err)
	}
	got := h.list(h.alice, nil)
	if len(got) != 1 || got[0].Title != "build finished" || got[0].Body != "all green" || got[0].Level != "success" {
		t.Fatalf("created by ctl: %+v", got)
	}
	id := got[0].NotificationID
	if names, err := h.ls(alice, "/var/notify"); err != nil || !strings.Contains(strings.Join(names, " "), "ctl err ") ||
		!strings.Contains(strings.Join(names, " "), "alice") {
		t.Fatalf("ls /var/notify: %v %v", names, err)
	}
	if names, err := h.ls(alice, "/var/notify/alice"); err != nil || len(names) != 1 || names[0] != id {
		t.Fatalf("ls /var/notify/alice: %v %v", names, err)
	}
	text, err := h.cat(alice, "/var/notify/alice/"+id)
	if err != nil || !strings.Contains(text, `"title": "build finished"`) || !strings.HasSuffix(text, "}\n") {
		t.Fatalf("cat: %q %v", text, err)
	}
	if rt, err := h.cat(root, "/var/notify/alice/"+id); err != nil || rt != text {
		t.Fatalf("root's cat: %q %v", rt, err)
	}
	if _, err := h.ls(bob, "/var/notify/alice"); abi.KindOf(err) != abi.Permission {
		t.Fatalf("bob lists alice's: %v", err)
	}
	if _, err := h.cat(bob, "/var/notify/alice/"+id); abi.KindOf(err) != abi.Permission {
		t.Fatalf("bob reads alice's: %v", err)
	}
	// Bad lines fail their write and leave the message in err.
	for _, c := range []struct{ line, want string }{
		{`create title=x level=loud`, `notification.create: level "loud"`},
		{`create`, "usage: create"},
		{`create a title=b`, "not both"},
		{`create x ttl=forever`, `ttl "forever"`},
		{`create x colour=red`, `unknown option "colour"`},
		{`dismiss`, "usage: dismiss <id>"},
		{`dismiss nosuch`, "notification.dismiss: nosuch: no such notification"},
		{`read ` + id + ` extra`, "usage: read <id>"},
		{`explode`, `unknown verb "explode"`},
	} {
		err := h.ctl(alice, c.line)
		if err == nil {
			t.Errorf("%q: accepted", c.line)
			continue
		}
		if e, _ := h.cat(alice, "/var/notify/err"); !strings.Contains(e, c.want) {
			t.Errorf("%q: err %q, want %q (write: %v)", c.line, e, c.want, err)
		}
	}
	if n := h.rows(); n != 1 {
		t.Fatalf("bad lines stored: %d rows", n)
	}
	// Bob cannot dismiss alice's; alice can.
	if err := h.ctl(bob, "dismiss "+id); abi.KindOf(err) != abi.NotExist {
		t.Fatalf("bob dismissed alice's: %v", err)
	}
	if err := h.ctl(alice, "read "+id); err != nil {
		t.Fatal(err)
	}
	if err := h.ctl(alice, "dismiss "+id); err != nil {
		t.Fatal(err)
	}
	if names, err := h.ls(alice, "/var/notify/alice"); err != nil || len(names) != 0 {
		t.Fatalf("a dismissed notification is listed: %v %v", names, err)
	}
	if _, err := h.cat(alice, "/var/notify/alice/"+id); abi.KindOf(err) != abi.NotExist {
		t.Fatalf("cat of a dismissed notification: %v", err)
	}
	// JSON args carry what words cannot.
	if err := h.ctl(alice, `create {"title":"multi","body":"line 1\nline 2","actions":[{"kind":"open","label":"Open"}]}`); err != nil {
		t.Fatal(err)
	}
	if got := h.list(h.alice, nil); len(got) != 1 || got[0].Body != "line 1\nline 2" || len(got[0].Actions) != 1 {
		t.Fatalf("JSON create: %+v", got)
	}
}
