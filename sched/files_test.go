package sched

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/fusefs"
)

// ftHarness is kerneltest's kernel (users alice, uid 1000 and host uid
// 1001, and bob, uid 1001 and host uid 1002) with the tests' proc room
// (procroom_test.go) and the scheduler added. A crontab write's
// reachability check asks the proc room (proc.status through the
// dispatcher).
type ftHarness struct {
	t                *testing.T
	k                *kernel.Kernel
	m                *Manager
	root, alice, bob vfs.Cred
}

func newFTHarness(t *testing.T) *ftHarness {
	t.Helper()
	quiet := kerneltest.Quiet()
	k := kerneltest.Open(t).K
	ctx := context.Background()
	space := ns.New(k)
	if err := space.Add(ctx, newProcRoom()); err != nil {
		t.Fatal(err)
	}
	m, err := Open(space, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, m); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { space.Close() }) // before kerneltest closes the kernel
	h := &ftHarness{t: t, k: k, m: m}
	for uid, c := range map[int]*vfs.Cred{0: &h.root, 1001: &h.alice, 1002: &h.bob} {
		if *c, err = m.space.Authenticate(ctx, vfs.Peer{Transport: "fuse", HostUID: uid, HostGID: 100}); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// schedules lists uid's schedules in crontab order.
func (h *ftHarness) schedules(uid uint32) []Schedule {
	h.t.Helper()
	ss, err := h.m.query(context.Background(), `WHERE owner_uid=? ORDER BY seq`, uid)
	if err != nil {
		h.t.Fatal(err)
	}
	return ss
}

// byName indexes schedules by name.
func byName(ss []Schedule) map[string]Schedule {
	out := map[string]Schedule{}
	for _, s := range ss {
		out[s.Name] = s
	}
	return out
}

// sameSchedules fails unless a and b are the same schedules, untouched:
// same ids, names, next run times, creation and update times.
func sameSchedules(t *testing.T, a, b []Schedule) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%d schedules, then %d", len(a), len(b))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.ID != y.ID || x.Name != y.Name || x.CreatedAtMs != y.CreatedAtMs || x.UpdatedAtMs != y.UpdatedAtMs ||
			fmtPtr(x.State.NextRunAtMs) != fmtPtr(y.State.NextRunAtMs) || x.Enabled != y.Enabled {
			t.Fatalf("schedule %d changed:\n%+v\n%+v", i, x, y)
		}
	}
}

func fmtPtr(p *int64) int64 {
	if p == nil {
		return -1
	}
	return *p
}

// dir walks from the root to path.
func (h *ftHarness) dir(cred vfs.Cred, path string) vfs.Dir {
	h.t.Helper()
	var d vfs.Dir = h.m.space.Root().(vfs.Dir)
	for _, name := range strings.Split(strings.Trim(path, "/"), "/") {
		n, err := d.Lookup(context.Background(), cred, name)
		if err != nil {
			h.t.Fatalf("lookup %s in %s: %v", name, path, err)
		}
		d = n.(vfs.Dir)
	}
	return d
}

func (h *ftHarness) read(cred vfs.Cred, dir, name string) (string, error) {
	ctx := context.Background()
	n, err := h.dir(cred, dir).Lookup(ctx, cred, name)
	if err != nil {
		return "", err
	}
	hd, err := n.(vfs.File).Open(ctx, cred, os.O_RDONLY)
	if err != nil {
		return "", err
	}
	defer hd.Close(ctx)
	var out []byte
	buf := make([]byte, 4096)
	for {
		k, err := hd.Read(ctx, buf, int64(len(out)))
		if err != nil {
			return "", err
		}
		if k == 0 {
			return string(out), nil
		}
		out = append(out, buf[:k]...)
	}
}

// write writes data to an open of dir/name with flags, in two pieces, and
// closes it as close(2) does: flush, then release.
func (h *ftHarness) write(cred vfs.Cred, dir, name string, flags int, data string) error {
	ctx := context.Background()
	d := h.dir(cred, dir)
	var hd vfs.Handle
	n, err := d.Lookup(ctx, cred, name)
	switch {
	case err == nil:
		hd, err = n.(vfs.File).Open(ctx, cred, flags)
	case vfs.Errno(err) == syscall.ENOENT && flags&os.O_CREATE != 0:
		_, hd, err = d.(vfs.Creator).Create(ctx, cred, name, flags, 0o600)
	}
	if err != nil {
		return err
	}
	half := len(data) / 2
	off := int64(0)
	for _, p := range []string{data[:half], data[half:]} {
		k, err := hd.Write(ctx, []byte(p), off)
		if err != nil {
			hd.Close(ctx)
			return err
		}
		off += int64(k)
	}
	var ferr error
	if fl, ok := hd.(vfs.Flusher); ok {
		ferr = fl.Flush(ctx)
	}
	if err := hd.Close(ctx); ferr == nil {
		ferr = err
	}
	return ferr
}

const ftCrontab = `CRON_TZ=Europe/Paris
0 0 1 1 *     event init:1000 happy new year   # name=newyear
@every 1h     lifecycle init:1000 compact keep=80 # name=tidy
@after 10m    event init:1000 remind me to stretch
@at 2099-12-01T09:00:00Z  spawn task renew the certificate # name=cert
#disabled @daily spawn task tidy up # name=off
`

func TestCrontabFilesVFS(t *testing.T) {
	h := newFTHarness(t)
	const spool = "/var/spool/cron"
	ctx := context.Background()

	// Each user sees ctl, err and their own crontab; root sees everyone's.
	names := func(cred vfs.Cred) string {
		ents, err := h.dir(cred, spool).ReadDir(ctx, cred)
		if err != nil {
			t.Fatal(err)
		}
		var ns []string
		for _, e := range ents {
			ns = append(ns, e.Name)
		}
		return strings.Join(ns, " ")
	}
	if got := names(h.alice); got != "ctl err alice" {
		t.Errorf("alice sees %q", got)
	}
	if got := names(h.root); got != "ctl err alice bob root" {
		t.Errorf("root sees %q", got)
	}
	if _, err := h.read(h.alice, spool, "bob"); vfs.Errno(err) != syscall.ENOENT {
		t.Errorf("alice reading bob's crontab: %v", err)
	}
	if err := h.write(h.alice, spool, "bob", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, "@daily spawn task x\n"); vfs.Errno(err) != syscall.EACCES {
		t.Errorf("alice writing bob's crontab: %v", err)
	}

	// Write, read back with ids, write back unchanged.
	if err := h.write(h.alice, spool, "alice", os.O_WRONLY|os.O_TRUNC, ftCrontab); err != nil {
		t.Fatal(err)
	}
	ss := h.schedules(1000)
	if len(ss) != 5 {
		t.Fatalf("%d schedules", len(ss))
	}
	text, err := h.read(h.alice, spool, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		if !strings.Contains(text, "name="+s.Name+" id="+s.ID+"\n") {
			t.Errorf("crontab lacks %s %s:\n%s", s.Name, s.ID, text)
		}
	}
	if off := byName(ss)["off"]; off.Enabled || !strings.Contains(text, "#disabled @daily spawn task tidy up # name=off") {
		t.Errorf("disabled line: %+v\n%s", off, text)
	}
	if err := h.write(h.alice, spool, "alice", os.O_WRONLY|os.O_TRUNC, text); err != nil {
		t.Fatal(err)
	}
	sameSchedules(t, ss, h.schedules(1000))
	// The original text (no ids: names match) changes nothing either, but
	// the unnamed line is a new schedule each time.
	if err := h.write(h.alice, spool, "alice", os.O_WRONLY|os.O_TRUNC, strings.ReplaceAll(ftCrontab, "@after 10m    event init:1000 remind me to stretch\n", "")); err != nil {
		t.Fatal(err)
	}
	after := h.schedules(1000)
	sameSchedules(t, append(ss[:2:2], ss[3:]...), after)

	// A bad line rejects the whole write and changes nothing.
	bad := text + "0 25 * * * spawn task never\n"
	err = h.write(h.alice, spool, "alice", os.O_WRONLY|os.O_TRUNC, bad)
	if vfs.Errno(err) != syscall.EINVAL || !strings.Contains(err.Error(), "line 7: cron expression") {
		t.Fatalf("bad line: %v", err)
	}
	if msg, _ := h.read(h.alice, spool, "err"); !strings.Contains(msg, "line 7: cron expression") {
		t.Errorf("err view: %q", msg)
	}
	sameSchedules(t, after, h.schedules(1000))
	// An @at in the past is the syscall's error, with its line.
	err = h.write(h.alice, spool, "alice", os.O_WRONLY|os.O_APPEND, "@at 2001-01-01T00:00:00Z spawn task late\n")
	if vfs.Errno(err) != syscall.EINVAL || !strings.Contains(err.Error(), "is in the past") || !strings.Contains(err.Error(), "line 6:") {
		t.Fatalf("past @at: %v", err)
	}
	sameSchedules(t, after, h.schedules(1000))

	// Append: the rendering plus a line.
	if err := h.write(h.alice, spool, "alice", os.O_WRONLY|os.O_APPEND, "@every 2h event init:1000 appended # name=app\n"); err != nil {
		t.Fatal(err)
	}
	now := h.schedules(1000)
	sameSchedules(t, after, now[:len(after)])
	if got := now[len(now)-1]; got.Name != "app" || got.Expression.EveryMs != 7200000 {
		t.Errorf("appended %+v", got)
	}

	// An editor: a temporary file renamed over the crontab, and a backup
	// made by renaming the crontab away (which keeps it).
	d := h.dir(h.alice, spool)
	text, _ = h.read(h.alice, spool, "alice")
	edited := strings.Replace(text, "happy new year", "happy new year!", 1)
	if err := h.write(h.alice, spool, "4913", os.O_WRONLY|os.O_CREATE|os.O_EXCL, ""); err != nil {
		t.Fatal(err)
	}
	if err := d.(vfs.Remover).Remove(ctx, h.alice, "4913", false); err != nil {
		t.Fatal(err)
	}
	if err := d.(vfs.Renamer).Rename(ctx, h.alice, "alice", d, "alice~"); err != nil {
		t.Fatal(err)
	}
	if got, _ := h.read(h.alice, spool, "alice~"); got != text {
		t.Errorf("backup %q", got)
	}
	if got := names(h.alice); got != "ctl err alice alice~" {
		t.Errorf("alice sees %q", got)
	}
	if got := names(h.bob); got != "ctl err bob" {
		t.Errorf("bob sees %q", got)
	}
	if err := h.write(h.alice, spool, ".alice.tmp", os.O_WRONLY|os.O_CREATE|os.O_EXCL, edited); err != nil {
		t.Fatal(err)
	}
	if err := d.(vfs.Renamer).Rename(ctx, h.alice, ".alice.tmp", d, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Lookup(ctx, h.alice, ".alice.tmp"); vfs.Errno(err) != syscall.ENOENT {
		t.Errorf("temp file still there: %v", err)
	}
	if got := byName(h.schedules(1000))["newyear"]; got.ID != byName(now)["newyear"].ID || got.Target.Message != "happy new year!" {
		t.Errorf("edited: %+v", got)
	}
	// A bad temp file renamed over it fails with EINVAL and changes nothing.
	before := h.schedules(1000)
	if err := h.write(h.alice, spool, "tmp2", os.O_WRONLY|os.O_CREATE, "@every 1h nonsense\n"); err != nil {
		t.Fatal(err)
	}
	if err := d.(vfs.Renamer).Rename(ctx, h.alice, "tmp2", d, "alice"); vfs.Errno(err) != syscall.EINVAL {
		t.Fatalf("bad rename: %v", err)
	}
	sameSchedules(t, before, h.schedules(1000))
	if err := d.(vfs.Remover).Remove(ctx, h.alice, "alice", false); vfs.Errno(err) != syscall.EPERM {
		t.Errorf("removing the crontab: %v", err)
	}

	// ctl: run, disable, enable, remove; the run is in the log.
	ctl := func(cred vfs.Cred, line string) error {
		n, err := h.dir(cred, spool).Lookup(ctx, cred, "ctl")
		if err != nil {
			return err
		}
		hd, err := n.(vfs.File).Open(ctx, cred, os.O_WRONLY|os.O_TRUNC)
		if err != nil {
			return err
		}
		defer hd.Close(ctx)
		_, err = hd.Write(ctx, []byte(line+"\n"), 0)
		return err
	}
	if err := ctl(h.alice, "run newyear"); err != nil {
		t.Fatal(err)
	}
	log, err := h.read(h.alice, "/var/log/gsv", "scheduler")
	if err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(strings.SplitN(log, "\n", 2)[0]), &rec); err != nil {
		t.Fatalf("log %q: %v", log, err)
	}
	if rec["schedule"] != "newyear" || rec["status"] != "ok" || rec["scheduleId"] != byName(now)["newyear"].ID || rec["error"] != nil {
		t.Errorf("log line %v", rec)
	}
	if bl, _ := h.read(h.bob, "/var/log/gsv", "scheduler"); bl != "" {
		t.Errorf("bob sees alice's runs: %q", bl)
	}
	if rl, _ := h.read(h.root, "/var/log/gsv", "scheduler"); rl != log {
		t.Errorf("root's log %q", rl)
	}
	if err := ctl(h.bob, "run newyear"); vfs.Errno(err) != syscall.ENOENT {
		t.Errorf("bob runs alice's schedule: %v", err)
	}
	if err := ctl(h.alice, "disable tidy"); err != nil {
		t.Fatal(err)
	}
	if text, _ := h.read(h.alice, spool, "alice"); !strings.Contains(text, "#disabled @every 1h lifecycle init:1000 compact keep=80 # name=tidy") {
		t.Errorf("disabled:\n%s", text)
	}
	if err := ctl(h.alice, "enable tidy"); err != nil {
		t.Fatal(err)
	}
	if err := ctl(h.root, "remove tidy owner=alice"); err != nil {
		t.Fatal(err)
	}
	if _, ok := byName(h.schedules(1000))["tidy"]; ok {
		t.Error("tidy not removed")
	}
	if err := ctl(h.alice, "frobnicate x"); vfs.Errno(err) != syscall.EINVAL {
		t.Errorf("unknown verb: %v", err)
	}

	// Root writes bob's crontab; emptying it removes every schedule.
	if err := h.write(h.root, spool, "bob", os.O_WRONLY|os.O_TRUNC, "@hourly spawn task b # name=b\n"); err != nil {
		t.Fatal(err)
	}
	if ss := h.schedules(1001); len(ss) != 1 || ss[0].CreatorUid != 0 || ss[0].RunAsUid != 1001 {
		t.Fatalf("bob's: %+v", ss)
	}
	if err := h.write(h.bob, spool, "bob", os.O_WRONLY|os.O_TRUNC, ""); err != nil {
		t.Fatal(err)
	}
	if ss := h.schedules(1001); len(ss) != 0 {
		t.Fatalf("bob's after emptying: %+v", ss)
	}
}

func TestCrontabReconcile(t *testing.T) {
	h := newFTHarness(t)
	ctx := context.Background()
	alice := ns.CallerOf(h.alice, "")
	set := func(text string) (*abi.CrontabSetResult, error) {
		return kernel.Do(ctx, h.k, alice, abi.SchedCrontabSet, &abi.CrontabSetArgs{Text: text})
	}
	get := func() string {
		res, err := kernel.Do(ctx, h.k, alice, abi.SchedCrontabGet, &abi.CrontabGetArgs{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Text
	}
	if _, err := set("@every 1h event init:1000 a # name=a\n@every 1h event init:1000 b # name=b\n@daily event init:1000 c\n"); err != nil {
		t.Fatal(err)
	}
	ss := h.schedules(1000)
	// Swap two names by id: both keep their ids and swap names; the
	// unnamed line matched by nothing... is matched by its id.
	text := get()
	swapped := strings.NewReplacer("name=a ", "name=b ", "name=b ", "name=a ").Replace(text)
	res, err := set(swapped)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Updated) != 2 || len(res.Added) != 0 || len(res.Removed) != 0 || res.Unchanged != 1 {
		t.Fatalf("swap: %+v", res)
	}
	after := h.schedules(1000)
	if after[0].ID != ss[0].ID || after[0].Name != "b" || after[1].Name != "a" || after[0].Target.Message != "a" {
		t.Fatalf("swap: %+v", after)
	}
	// Changing the @every interval re-anchors it; an unchanged line keeps
	// its next time.
	res, err = set(strings.Replace(get(), "@every 1h event init:1000 a", "@every 2h event init:1000 a", 1))
	if err != nil || len(res.Updated) != 1 || res.Unchanged != 2 {
		t.Fatalf("%+v %v", res, err)
	}
	now := h.schedules(1000)
	if now[0].Expression.EveryMs != 7200000 || fmtPtr(now[1].State.NextRunAtMs) != fmtPtr(after[1].State.NextRunAtMs) {
		t.Fatalf("%+v", now)
	}
	// Only root may set another uid's crontab.
	bob := uint32(1001)
	if _, err := kernel.Do(ctx, h.k, alice, abi.SchedCrontabSet, &abi.CrontabSetArgs{OwnerUid: &bob, Text: ""}); abi.Code(err) != 403 {
		t.Fatalf("alice sets bob's: %v", err)
	}
	// A parse error is a 400 naming the line.
	if _, err := set("\n\n@every 1h frob p x"); abi.Code(err) != 400 || !strings.Contains(err.Error(), "line 3: unknown target \"frob\"") {
		t.Fatalf("%v", err)
	}
	// Labels and other things a line cannot say survive a rewrite.
	if _, err := h.k.Call(ctx, alice, "sched.add", json.RawMessage(`{"name":"lab","expression":{"kind":"every","everyMs":60000},"target":{"kind":"process.spawn","profile":"task","label":"L","prompt":"p"}}`)); err != nil {
		t.Fatal(err)
	}
	res, err = set(strings.Replace(get(), "spawn task p", "spawn task q", 1))
	if err != nil || len(res.Updated) != 1 {
		t.Fatalf("%+v %v", res, err)
	}
	if lab := byName(h.schedules(1000))["lab"]; lab.Target.Label != "L" || lab.Target.Prompt != "q" {
		t.Fatalf("%+v", lab.Target)
	}
}

// TestCrontabFUSE drives the files through a real FUSE mount with shell
// commands, as root and as host users 1001 (alice) and 1002 (bob).
func TestCrontabFUSE(t *testing.T) {
	h := newFTHarness(t)
	sh, mustSh := h.mountShell()
	// cat > crontab <<EOF, then cat shows the ids.
	mustSh(1001, "cat > $D/alice <<'EOF'\n"+ftCrontab+"EOF")
	ss := h.schedules(1000)
	if len(ss) != 5 {
		t.Fatalf("%d schedules", len(ss))
	}
	text := mustSh(1001, "cat $D/alice")
	for _, s := range ss {
		if !strings.Contains(text, "# name="+s.Name+" id="+s.ID+"\n") {
			t.Errorf("cat lacks %s:\n%s", s.ID, text)
		}
	}
	// Writing the same text back changes nothing.
	mustSh(1001, `t=$(cat $D/alice); printf '%s\n' "$t" > $D/alice; cat $D/alice > /dev/null`)
	mustSh(1001, `cp $D/alice /tmp/gsvcron-copy.$$ && cat /tmp/gsvcron-copy.$$ > $D/alice; rm -f /tmp/gsvcron-copy.$$`)
	sameSchedules(t, ss, h.schedules(1000))
	if got := mustSh(1001, "cat $D/alice"); got != text {
		t.Errorf("rendering changed:\n%s\n%s", text, got)
	}

	// A bad line rejects the whole write with EINVAL; err says why.
	out, err := sh(1001, "cat > $D/alice <<'EOF'\n@every 1h event p fine # name=fine\n*/61 * * * * event p bad\nEOF")
	if err == nil || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("bad write: %v\n%s", err, out)
	}
	if msg := mustSh(1001, "cat $D/err"); !strings.Contains(msg, "line 2: cron expression \"*/61 * * * *\"") {
		t.Errorf("err: %q", msg)
	}
	sameSchedules(t, ss, h.schedules(1000))

	// Append a line.
	mustSh(1001, "echo '@every 2h event init:1000 appended # name=app' >> $D/alice")
	now := h.schedules(1000)
	sameSchedules(t, ss, now[:len(ss)])
	if len(now) != 6 || now[5].Name != "app" {
		t.Fatalf("after append: %+v", now)
	}

	// Editors: a temporary file moved over the crontab; sed -i; vim.
	mustSh(1001, `sed 's/happy new year/happy new year!/' $D/alice > $D/.alice.new; mv $D/.alice.new $D/alice`)
	mustSh(1001, `sed -i 's/remind me to stretch/remind me to walk/' $D/alice`)
	if _, err := exec.LookPath("vim"); err == nil {
		mustSh(1001, `vim -Nu NONE -i NONE -es -c '%s/renew the certificate/renew the certificates/' -c 'wq' $D/alice`)
	}
	edited := byName(h.schedules(1000))
	if got := edited["newyear"]; got.ID != byName(now)["newyear"].ID || got.Target.Message != "happy new year!" {
		t.Errorf("mv: %+v", got)
	}
	for _, s := range now {
		if s.Expression.Kind == "after" && edited[s.Name].Target.Message != "remind me to walk" {
			t.Errorf("sed -i: %+v", edited[s.Name])
		}
	}
	if _, err := exec.LookPath("vim"); err == nil && edited["cert"].Target.Prompt != "renew the certificates" {
		t.Errorf("vim: %+v", edited["cert"])
	}
	if left := mustSh(1001, "ls -A $D"); left != "alice\nctl\nerr\n" {
		t.Errorf("scratch files left behind: %q", left)
	}
	// A bad edit moved over the crontab fails and changes nothing.
	before := h.schedules(1000)
	// (rename(2) fails with EINVAL, which mv reports as "cannot move to a
	// subdirectory of itself"; err has the real message.)
	out, err = sh(1001, `echo '@every 1h lifecycle p explode' > $D/tmp.x; mv $D/tmp.x $D/alice`)
	if err == nil {
		t.Errorf("bad mv succeeded: %s", out)
	}
	if msg := mustSh(1001, "cat $D/err"); !strings.Contains(msg, `line 1: lifecycle action "explode"`) {
		t.Errorf("err: %q", msg)
	}
	sameSchedules(t, before, h.schedules(1000))
	mustSh(1001, "rm $D/tmp.x")

	// ctl: run a schedule by name; the run is in the log.
	mustSh(1001, "echo 'run newyear' > $D/ctl")
	log := mustSh(1001, "head -n 1 $L")
	var rec map[string]any
	if err := json.Unmarshal([]byte(log), &rec); err != nil {
		t.Fatalf("log %q: %v", log, err)
	}
	if rec["schedule"] != "newyear" || rec["status"] != "ok" {
		t.Errorf("log: %v", rec)
	}
	if _, err := sh(1001, "echo 'run nosuch' > $D/ctl"); err == nil {
		t.Error("run nosuch succeeded")
	}

	// Another user's crontab is invisible; root sees everyone's.
	if got := mustSh(1002, "ls $D"); got != "bob\nctl\nerr\n" {
		t.Errorf("bob sees %q", got)
	}
	if out, err := sh(1002, "cat $D/alice"); err == nil || !strings.Contains(out, "No such file") {
		t.Errorf("bob reads alice's crontab: %v %s", err, out)
	}
	if out, err := sh(1002, "echo '@daily spawn task x' > $D/alice"); err == nil {
		t.Errorf("bob writes alice's crontab: %s", out)
	}
	if got := mustSh(1002, "cat $L"); got != "" {
		t.Errorf("bob sees runs: %q", got)
	}
	if got := mustSh(0, "ls $D"); got != "alice\nbob\nctl\nerr\nroot\n" {
		t.Errorf("root sees %q", got)
	}
	if got := mustSh(0, "cat $D/alice"); got != mustSh(1001, "cat $D/alice") {
		t.Errorf("root reads alice's crontab:\n%s", got)
	}
	// Emptying the crontab removes every schedule.
	// (The empty content is applied when the file is released, which the
	// kernel does after close(2) returns.)
	mustSh(1001, ": > $D/alice")
	for deadline := time.Now().Add(waitLimit); len(h.schedules(1000)) != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after emptying: %+v", h.schedules(1000))
		}
	}
}

// TestCrontabWriteChecked: through FUSE with bash, a complete crontab
// line that does not parse fails the write(2) that completes it (so the
// shell sees it, although it ignores close(2)), the crontab keeps its
// schedules and err says why; a line in many 4 KiB pieces is checked once
// whole; editors' scratch file and rename flows still work.
func TestCrontabWriteChecked(t *testing.T) {
	h := newFTHarness(t)
	sh, mustSh := h.mountShell()
	mustSh(1001, "echo '@every 1h event init:1000 first # name=first' > $D/alice")
	before := h.schedules(1000)
	if len(before) != 1 {
		t.Fatalf("schedules %+v", before)
	}
	bad := []struct{ why, script, msg string }{
		{"echo >>", `echo 'bad line' >> $D/alice`, `line 2: `},
		{"echo >", `echo '* * * * * frob x' > $D/alice`, `line 1: unknown target "frob"`},
		{"every below 1s", `echo '@every 10ms event init:1000 x' >> $D/alice`, "at least 1s"},
		{"ESC in a message", `printf '@every 1h event init:1000 hi [2J
' >> $D/alice`, "control character"},
		{"a long line in pieces", `echo '@every 1h event init:1000 ` + strings.Repeat("x", 20000) + `'$'\e' >> $D/alice`, "line 2: message has a control character"},
		{"the second line of one write", `printf '@daily event init:1000 ok\n61 * * * * event init:1000 no\n' >> $D/alice`, "line 3: cron expression"},
	}
	for _, b := range bad {
		out, err := sh(1001, b.script)
		if err == nil {
			t.Errorf("%s: the shell succeeded: %s", b.why, out)
			continue
		}
		if !strings.Contains(out, "Invalid argument") {
			t.Errorf("%s: %s", b.why, out)
		}
		if msg := mustSh(1001, "cat $D/err"); !strings.Contains(msg, b.msg) {
			t.Errorf("%s: err %q, want %q", b.why, msg, b.msg)
		}
		sameSchedules(t, before, h.schedules(1000))
	}
	// A good line of 20,000 bytes, written by echo in 4 KiB pieces, is one
	// line.
	long := strings.Repeat("y", 20000)
	mustSh(1001, "echo '@every 2h event init:1000 "+long+" # name=long' >> $D/alice")
	if got := byName(h.schedules(1000))["long"]; got.Target.Message != long {
		t.Fatalf("long line: message of %d bytes", len(got.Target.Message))
	}
	// Scratch file then rename (crontab -e, sed -i, vim's write).
	mustSh(1001, `cat $D/alice > $D/.edit.tmp && echo '@hourly event init:1000 edited # name=edited' >> $D/.edit.tmp && mv $D/.edit.tmp $D/alice`)
	mustSh(1001, `sed -i 's/ first / firsts /' $D/alice`)
	got := byName(h.schedules(1000))
	if got["edited"].ID == "" || got["first"].Target.Message != "firsts" || got["first"].ID != before[0].ID {
		t.Fatalf("after editing: %+v", got)
	}
	// A bad scratch file can be written (it is not the crontab); its
	// rename fails.
	if out, err := sh(1001, `echo 'bad line' > $D/.bad.tmp; mv $D/.bad.tmp $D/alice`); err == nil {
		t.Errorf("renaming a bad scratch file succeeded: %s", out)
	}
	if n := len(h.schedules(1000)); n != 3 {
		t.Errorf("%d schedules after a bad rename, want 3", n)
	}
}

// TestCrontabHandleChecks drives a crontab handle with writes at offsets
// and truncations: a line is checked when it is complete, a rewrite before
// what was checked is checked again, and after a failed write nothing is
// applied.
func TestCrontabHandleChecks(t *testing.T) {
	good := "@every 1h event init:1000 good # name=good\n"
	type op struct {
		off   int64 // -1: truncate to trunc
		data  string
		trunc int64
		fail  bool
	}
	for _, c := range []struct {
		why     string
		flags   int
		ops     []op
		applied bool // the schedule "good" exists afterwards
	}{
		{"pieces of one good line", os.O_TRUNC, []op{{0, good[:10], 0, false}, {10, good[10:30], 0, false}, {30, good[30:], 0, false}}, true},
		{"a bad line ends in the last piece", os.O_TRUNC, []op{{0, good, 0, false}, {int64(len(good)), "@every 1h fr", 0, false}, {int64(len(good)) + 12, "ob x\n", 0, true}}, false},
		{"a bad final line without a newline fails only at close", os.O_TRUNC, []op{{0, good, 0, false}, {int64(len(good)), "@every 1h frob", 0, false}}, false},
		{"a bad line overwritten before its newline", os.O_TRUNC, []op{{0, "@every 1h frob", 0, false}, {0, good, 0, false}}, true},
		{"a checked line rewritten badly", os.O_TRUNC, []op{{0, good, 0, false}, {10, "frob frob frob\n", 0, true}}, false},
		{"a bad tail cut off by truncate", os.O_TRUNC, []op{{0, good, 0, false}, {int64(len(good)), "@every", 0, false}, {-1, "", int64(len(good)), false}}, true},
		{"truncate then a bad line", os.O_TRUNC, []op{{0, good + good, 0, false}, {-1, "", 0, false}, {0, "x\n", 0, true}}, false},
	} {
		t.Run(c.why, func(t *testing.T) {
			h := newFTHarness(t)
			ctx := context.Background()
			n, err := h.dir(h.alice, "/var/spool/cron").Lookup(ctx, h.alice, "alice")
			if err != nil {
				t.Fatal(err)
			}
			hd, err := n.(vfs.File).Open(ctx, h.alice, os.O_WRONLY|c.flags)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range c.ops {
				if o.off < 0 {
					err = hd.(vfs.Truncater).Truncate(ctx, o.trunc)
				} else {
					_, err = hd.Write(ctx, []byte(o.data), o.off)
				}
				if (err != nil) != o.fail {
					t.Fatalf("op %d (%+v): %v", i, o, err)
				}
				if err != nil && vfs.Errno(err) != syscall.EINVAL {
					t.Fatalf("op %d: errno %v, want EINVAL", i, vfs.Errno(err))
				}
			}
			hd.(vfs.Flusher).Flush(ctx)
			hd.Close(ctx)
			if _, ok := byName(h.schedules(1000))["good"]; ok != c.applied {
				t.Fatalf("applied %v, want %v: %+v", ok, c.applied, h.schedules(1000))
			}
		})
	}
}

// TestCronCtlRunFails: through FUSE, `echo 'run <name>' > ctl` whose run
// fails fails the write with the run's errno, and err holds the message;
// /var/log/gsv/scheduler lists runs oldest first, so tail shows the
// latest.
func TestCronCtlRunFails(t *testing.T) {
	h := newFTHarness(t)
	sh, mustSh := h.mountShell()
	mustSh(1001, "printf '%s\n' '@daily spawn nosuchprofile do it # name=broken' '@daily event init:1000 fine # name=fine' > $D/alice")
	out, err := sh(1001, "echo 'run broken' > $D/ctl")
	if err == nil || !strings.Contains(out, "Invalid argument") {
		t.Fatalf("a failed run: %v %s", err, out)
	}
	if msg := mustSh(1001, "cat $D/err"); !strings.Contains(msg, "run failed") || !strings.Contains(msg, "unknown profile") {
		t.Errorf("err %q", msg)
	}
	mustSh(1001, "echo 'run fine' > $D/ctl")
	for range 3 {
		mustSh(1001, "echo 'run fine' > $D/ctl")
	}
	mustSh(1001, "echo 'run broken' > $D/ctl || true")
	lines := strings.Split(strings.TrimSpace(mustSh(1001, "cat $L")), "\n")
	var first, last map[string]any
	json.Unmarshal([]byte(lines[0]), &first)
	json.Unmarshal([]byte(mustSh(1001, "tail -n 1 $L")), &last)
	if len(lines) != 6 || first["schedule"] != "broken" || last["schedule"] != "broken" || last["status"] != "error" {
		t.Fatalf("log (want oldest first, 6 runs):\n%s", strings.Join(lines, "\n"))
	}
	for i := 1; i < len(lines); i++ {
		var a, b map[string]any
		json.Unmarshal([]byte(lines[i-1]), &a)
		json.Unmarshal([]byte(lines[i]), &b)
		if a["startedAt"].(string) > b["startedAt"].(string) {
			t.Fatalf("log out of order at line %d:\n%s", i+1, strings.Join(lines, "\n"))
		}
	}
}

// mountShell mounts h's namespace with FUSE (skipping the test if it
// cannot) and returns sh, which runs a bash script as a host uid (0:
// root) with $D the spool and $L the log and returns its combined output
// and whether it failed, and mustSh, which fails the test if it fails.
func (h *ftHarness) mountShell() (sh func(uid int, script string) (string, error), mustSh func(uid int, script string) string) {
	t := h.t
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (setpriv, a FUSE mount reachable by other uids)")
	}
	for _, tool := range []string{"bash", "setpriv", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s", tool)
		}
	}
	mnt, err := os.MkdirTemp("", "gsvcron-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(mnt, 0o755)
	srv, err := fusefs.Mount(mnt, h.m.space.Root(), h.m.space, fusefs.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if errors.Is(err, syscall.EPERM) || errors.Is(err, os.ErrNotExist) {
		os.Remove(mnt)
		t.Skipf("cannot mount: %v", err)
	}
	if err != nil {
		os.Remove(mnt)
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		srv.Wait()
		os.Remove(mnt)
	})
	spool := filepath.Join(mnt, "var/spool/cron")
	// sh runs script as host uid (0: root), in bash, with $D the spool
	// and $L the log; it returns the combined output and whether it failed.
	sh = func(uid int, script string) (string, error) {
		t.Helper()
		args := []string{"bash", "-c", "set -e\n" + script}
		if uid != 0 {
			args = append([]string{"setpriv", "--reuid=" + strconv.Itoa(uid), "--regid=100", "--clear-groups"}, args...)
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/nonexistent", "LANG=C", "D=" + spool, "L=" + filepath.Join(mnt, "var/log/gsv/scheduler")}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mustSh = func(uid int, script string) string {
		t.Helper()
		out, err := sh(uid, script)
		if err != nil {
			t.Fatalf("%s\n%s: %v", script, out, err)
		}
		return out
	}

	return sh, mustSh
}
