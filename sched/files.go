package sched

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

const (
	cronDirPath = "/var/spool/cron"
	logPath     = "/var/log/gsv/scheduler"

	// maxCrontab is the largest crontab a write may hold.
	maxCrontab = 1 << 20
	// Editors' scratch files in /var/spool/cron (temporary files, vim's
	// 4913 probe, swap and backup files) are kept in memory, per caller:
	// at most maxTemps of at most maxTempSize bytes each, dropped after
	// tempTTL without use.
	maxTemps    = 16
	maxTempSize = 2 << 20
	tempTTL     = time.Hour
)

// cronDir makes /var/spool/cron.
func (m *Manager) cronDir() *cronDir {
	d := &cronDir{
		Meta:  ns.RootMeta(cronDirPath, fs.ModeDir|fs.ModeSticky|0o777),
		m:     m,
		errv:  m.space.ErrView(cronDirPath),
		temps: map[uint32]map[string]*tempFile{},
	}
	d.ctl = m.space.Ctl(cronDirPath, ns.RootMeta(cronDirPath+"/ctl", 0o666), m.ctlVerbs())
	return d
}

// ctlVerbs are the verbs of /var/spool/cron/ctl. Each takes an id or a
// name and, for root, owner=<user|uid> to name another user's schedule.
func (m *Manager) ctlVerbs() map[string]ns.CtlVerb {
	ref := func(l ns.CtlLine, usage string) (string, *uint32, error) {
		var uid *uint32
		if o, ok := l.LookupOpt("owner"); ok {
			u, err := m.uidOf(o)
			if err != nil {
				return "", nil, err
			}
			uid = &u
		}
		if l.JSON != nil {
			return "", uid, nil
		}
		if len(l.Words) != 1 {
			return "", nil, abi.E(abi.Invalid, fmt.Sprintf("usage: %s", usage))
		}
		return l.Words[0], uid, nil
	}
	enable := func(on bool) ns.CtlVerb {
		verb := map[bool]string{true: "enable", false: "disable"}[on]
		return func(l ns.CtlLine) (kernel.Bound, error) {
			id, uid, err := ref(l, verb+" <id|name> [owner=<user>]")
			if err != nil {
				return kernel.Bound{}, err
			}
			return kernel.Bind(abi.SchedUpdate, &abi.SchedUpdateArgs{ID: id, OwnerUid: uid, Patch: abi.SchedPatch{Enabled: &on}}), nil
		}
	}
	return map[string]ns.CtlVerb{
		"run": func(l ns.CtlLine) (kernel.Bound, error) {
			id, uid, err := ref(l, "run <id|name>|due [owner=<user>]")
			if err != nil {
				return kernel.Bound{}, err
			}
			if id == "due" {
				return kernel.Bind(abi.SchedCtlRun, &abi.SchedRunArgs{Mode: "due", OwnerUid: uid}), nil
			}
			mode := "force"
			if l.JSON != nil {
				mode = ""
			}
			return kernel.Bind(abi.SchedCtlRun, &abi.SchedRunArgs{ID: id, Mode: mode, OwnerUid: uid}), nil
		},
		"enable":  enable(true),
		"disable": enable(false),
		"remove": func(l ns.CtlLine) (kernel.Bound, error) {
			id, uid, err := ref(l, "remove <id|name> [owner=<user>]")
			if err != nil {
				return kernel.Bound{}, err
			}
			return kernel.Bind(abi.SchedRemove, &abi.SchedIDArgs{ID: id, OwnerUid: uid}), nil
		},
	}
}

// uidOf reads a uid or a user name.
func (m *Manager) uidOf(s string) (uint32, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return uint32(n), nil
	}
	us, err := m.users(context.Background())
	if err != nil {
		return 0, err
	}
	for _, u := range us {
		if u.Username == s {
			return u.Uid, nil
		}
	}
	return 0, abi.E(abi.NotExist, fmt.Sprintf("no such user %q", s))
}

// users lists every user through sys.user.list, made by the kernel: the
// caller of a ctl line or a scratch file's name need not be able to list
// them.
func (m *Manager) users(ctx context.Context) ([]kernel.User, error) {
	res, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.SysUserList, nil)
	if err != nil {
		return nil, err
	}
	return res.Users, nil
}

// logLine is one line of /var/log/gsv/scheduler.
type logLine struct {
	Schedule    string  `json:"schedule"`
	ScheduleID  string  `json:"scheduleId"`
	ScheduledAt string  `json:"scheduledAt"`
	StartedAt   string  `json:"startedAt"`
	FinishedAt  string  `json:"finishedAt"`
	Status      string  `json:"status"`
	Error       *string `json:"error"`
	DurationMs  int64   `json:"durationMs"`
}

// logRotate is how many runs /var/log/gsv/scheduler holds before it
// rotates: it starts empty again, as a log that logrotate truncates.
const logRotate = 1000

// logView is /var/log/gsv/scheduler: the reader's runs since the log's
// last rotation (sched.log with Rotate), oldest first. It only grows
// between rotations, each run a line added at its end when it finishes,
// so tail -f follows it (vfs.View.Grows); its mtime is the newest run's
// end.
func (m *Manager) logView() *vfs.View {
	return &vfs.View{Meta: ns.RootMeta(logPath, 0o444), Grows: true,
		RenderAt: func(ctx context.Context, cred vfs.Cred) ([]byte, time.Time, error) {
			res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.SchedLog, &abi.SchedLogArgs{Rotate: logRotate})
			if err != nil {
				return nil, time.Time{}, err
			}
			var mtime time.Time
			if len(res.Runs) > 0 {
				mtime = time.UnixMilli(res.Runs[0].FinishedAtMs)
			}
			b, err := renderLog(res)
			return b, mtime, err
		}}
}

// renderLog renders sched.log's runs (the latest, newest first) as a log
// is read: oldest first, so that tail shows the latest runs.
func renderLog(r *abi.SchedLogResult) ([]byte, error) {
	runs := r.Runs
	ts := func(ms int64) string { return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00") }
	var b []byte
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		line, err := json.Marshal(logLine{r.Name, r.ScheduleID, ts(r.ScheduledAtMs), ts(r.StartedAtMs), ts(r.FinishedAtMs), r.Status, r.Error, r.DurationMs})
		if err != nil {
			return nil, err
		}
		b = append(append(b, line...), '\n')
	}
	return b, nil
}

// cronDir is /var/spool/cron: ctl, err, one crontab per user the caller
// may see (their own; root: every user's, and those of uids that have
// schedules but no user), and the caller's own scratch files.
type cronDir struct {
	*ns.Meta
	m    *Manager
	ctl  *vfs.Ctl
	errv *vfs.View

	mu    sync.Mutex
	temps map[uint32]map[string]*tempFile // by caller uid, then name
}

var (
	_ vfs.Dir     = (*cronDir)(nil)
	_ vfs.Creator = (*cronDir)(nil)
	_ vfs.Remover = (*cronDir)(nil)
	_ vfs.Renamer = (*cronDir)(nil)
)

// tab is one user's crontab as a directory entry.
type tab struct {
	name    string
	uid     uint32
	gid     uint32
	hostUID int
}

func (d *cronDir) caller(cred vfs.Cred) *kernel.Caller { return ns.CallerOf(cred, cronDirPath) }

// tabs lists the crontabs c may see.
func (d *cronDir) tabs(ctx context.Context, c *kernel.Caller) ([]tab, error) {
	if !c.IsRoot() {
		if c.Role == "nobody" || !c.Can(abi.SchedCrontabGet.Name) {
			return nil, nil
		}
		return []tab{{c.Username, c.Uid, c.Gid, c.HostUID}}, nil
	}
	// Root sees every user's crontab and those of owners with no user:
	// both lists are syscalls, as every read of the namespace is.
	res, err := kernel.Do(ctx, d.m.k, c, abi.SysUserList, nil)
	if err != nil {
		return nil, err
	}
	owners, err := kernel.Do(ctx, d.m.k, c, abi.SchedOwners, nil)
	if err != nil {
		return nil, err
	}
	var out []tab
	seen := map[uint32]bool{}
	for _, u := range res.Users {
		h := -1
		if u.HostUID != nil {
			h = *u.HostUID
		}
		out = append(out, tab{u.Username, u.Uid, u.Gid, h})
		seen[u.Uid] = true
	}
	for _, uid := range owners {
		if !seen[uid] {
			out = append(out, tab{strconv.FormatUint(uint64(uid), 10), uid, uid, -1})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// findTab returns the crontab called name that c may see.
func (d *cronDir) findTab(ctx context.Context, c *kernel.Caller, name string) (*tab, error) {
	ts, err := d.tabs(ctx, c)
	if err != nil {
		return nil, err
	}
	for i := range ts {
		if ts[i].name == name {
			return &ts[i], nil
		}
	}
	return nil, nil
}

// isUser reports whether name is some user's name (whose crontab the
// caller may not see): such a name cannot be a scratch file.
func (d *cronDir) isUser(ctx context.Context, name string) bool {
	us, err := d.m.users(ctx)
	if err != nil {
		return true
	}
	for _, u := range us {
		if u.Username == name {
			return true
		}
	}
	return false
}

// doc is the crontab file of t.
func (d *cronDir) doc(t *tab) *crontabFile {
	group := strconv.FormatUint(uint64(t.gid), 10)
	switch t.gid {
	case 0:
		group = "root"
	case kernel.UsersGID:
		group = "users"
	}
	uid := t.uid
	part := strconv.FormatUint(uint64(uid), 10)
	meta := &ns.Meta{Path: cronDirPath + "/" + t.name, Uid: t.uid, Gid: t.gid, Mode: 0o600,
		Owner: t.name, Group: group, HostUID: t.hostUID,
		Changed: func(context.Context, vfs.Cred) time.Time { return d.m.changes.At(time.Time{}, part) }}
	return &crontabFile{d.m, t.uid, &vfs.Document{Meta: meta, Max: maxCrontab,
		Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
			return d.render(ctx, d.caller(cred), uid)
		},
		Apply: func(ctx context.Context, cred vfs.Cred, data []byte) error {
			return d.apply(ctx, d.caller(cred), uid, data)
		}}}
}

// crontabFile is a user's crontab: a vfs.Document (the whole text is
// applied at close) whose lines are checked as they are written. Shells
// ignore close(2)'s error, so a complete line (one ending in a newline,
// however many writes carry it) that does not parse fails the write(2)
// that completes it with EINVAL; the handle then applies nothing, and
// its later writes fail too.
type crontabFile struct {
	m     *Manager
	owner uint32
	*vfs.Document
}

// Open implements vfs.File.
func (f *crontabFile) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	h, err := f.Document.Open(ctx, cred, flags)
	if err != nil || vfs.WantOf(flags)&vfs.WantWrite == 0 {
		return h, err
	}
	ch := &crontabHandle{Handle: h, m: f.m, c: ns.CallerOf(cred, cronDirPath), owner: f.owner, appendOnly: flags&os.O_APPEND != 0}
	// The copy starts as the rendering (nothing with O_TRUNC): its
	// lines are the stored schedules', not checked again unless
	// rewritten.
	buf := make([]byte, 64<<10)
	for {
		n, err := h.Read(ctx, buf, ch.size)
		if err != nil {
			h.Close(ctx)
			return nil, err
		}
		if n == 0 {
			break
		}
		ch.line += bytes.Count(buf[:n], []byte{'\n'})
		ch.size += int64(n)
	}
	if ch.size > 0 {
		// The rendering's schedules count towards the owner's limit.
		text, err := ch.readLocked(ctx, 0, ch.size)
		if err != nil {
			h.Close(ctx)
			return nil, err
		}
		ch.schedules = countSchedules(string(text))
	}
	ch.checked, ch.scanned = ch.size, ch.size
	return ch, nil
}

// crontabHandle is an open crontab: the document's handle, and how far
// its copy has been checked.
type crontabHandle struct {
	vfs.Handle // the document's
	m          *Manager
	c          *kernel.Caller
	owner      uint32 // the crontab's owner
	appendOnly bool

	mu      sync.Mutex
	size    int64 // the length of the copy
	checked int64 // the copy before checked is complete lines, checked
	scanned int64 // the copy from checked to scanned has no newline
	line    int   // the number of lines before checked
	// schedules is how many of the lines before checked are schedules.
	schedules int
	err       error // a line failed: nothing is applied
}

var (
	_ vfs.Flusher   = (*crontabHandle)(nil)
	_ vfs.Truncater = (*crontabHandle)(nil)
)

// Write writes to the copy, then checks the lines it completes.
func (h *crontabHandle) Write(ctx context.Context, p []byte, off int64) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return 0, h.err
	}
	if h.appendOnly {
		off = h.size
	}
	n, err := h.Handle.Write(ctx, p, off)
	if err != nil {
		return n, err
	}
	h.size = max(h.size, off+int64(n))
	if off < h.checked {
		h.checked, h.line, h.scanned, h.schedules = 0, 0, 0, 0 // a rewrite: check from the top
	} else {
		h.scanned = min(h.scanned, off)
	}
	if err := h.checkLocked(ctx); err != nil {
		h.err = err
		return 0, err
	}
	return n, nil
}

// checkLocked checks the complete lines after h.checked. h.mu is held.
func (h *crontabHandle) checkLocked(ctx context.Context) error {
	tail, err := h.readLocked(ctx, h.scanned, h.size)
	if err != nil {
		return err
	}
	i := bytes.LastIndexByte(tail, '\n')
	if i < 0 {
		h.scanned = h.size // a line still under way: nothing to check
		return nil
	}
	text, err := h.readLocked(ctx, h.checked, h.scanned+int64(i)+1)
	if err != nil {
		return err
	}
	n, err := kernel.Do(ctx, h.m.k, h.c, abi.SchedCrontabCheck,
		&abi.CrontabCheckArgs{Text: string(text), Line: h.line + 1, OwnerUid: h.owner, Before: h.schedules})
	if err != nil {
		return err
	}
	h.schedules += n
	h.checked += int64(len(text))
	h.scanned = h.checked
	h.line += bytes.Count(text, []byte{'\n'})
	return nil
}

// countSchedules is how many lines of a crontab's text are schedules
// (a rendering, which parses; 0 if it does not).
func countSchedules(text string) int {
	n, _ := countCrontabLines(text, 1)
	return n
}

// readLocked reads the copy from off to end. h.mu is held.
func (h *crontabHandle) readLocked(ctx context.Context, off, end int64) ([]byte, error) {
	b := make([]byte, max(end-off, 0))
	for got := 0; got < len(b); {
		n, err := h.Handle.Read(ctx, b[got:], off+int64(got))
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return b[:got], nil
		}
		got += n
	}
	return b, nil
}

// Truncate cuts or extends the copy.
func (h *crontabHandle) Truncate(ctx context.Context, size int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	t, ok := h.Handle.(vfs.Truncater)
	if !ok {
		return vfs.ErrReadOnly
	}
	if err := t.Truncate(ctx, size); err != nil {
		return err
	}
	h.size = size
	if size < h.checked {
		h.checked, h.line, h.scanned = 0, 0, 0
	} else {
		h.scanned = min(h.scanned, size)
	}
	return nil
}

// Flush applies the copy, unless a line failed.
func (h *crontabHandle) Flush(ctx context.Context) error {
	h.mu.Lock()
	bad := h.err != nil
	h.mu.Unlock()
	if bad {
		return nil // the write that failed said so
	}
	if f, ok := h.Handle.(vfs.Flusher); ok {
		return f.Flush(ctx)
	}
	return nil
}

// Close applies what is still pending, unless a line failed.
func (h *crontabHandle) Close(ctx context.Context) error {
	h.mu.Lock()
	bad := h.err != nil
	h.mu.Unlock()
	if bad {
		return nil
	}
	return h.Handle.Close(ctx)
}

func (d *cronDir) render(ctx context.Context, c *kernel.Caller, uid uint32) ([]byte, error) {
	res, err := kernel.Do(ctx, d.m.k, c, abi.SchedCrontabGet, &abi.CrontabGetArgs{OwnerUid: &uid})
	if err != nil {
		return nil, err
	}
	return []byte(res.Text), nil
}

func (d *cronDir) apply(ctx context.Context, c *kernel.Caller, uid uint32, data []byte) error {
	_, err := kernel.Do(ctx, d.m.k, c, abi.SchedCrontabSet, &abi.CrontabSetArgs{OwnerUid: &uid, Text: string(data)})
	return err
}

// Lookup implements vfs.Dir.
func (d *cronDir) Lookup(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
	switch name {
	case "ctl":
		return d.ctl, nil
	case "err":
		return d.errv, nil
	}
	c := d.caller(cred)
	t, err := d.findTab(ctx, c, name)
	if err != nil {
		return nil, err
	}
	if t != nil {
		return d.doc(t), nil
	}
	if n := d.temp(c, name); n != nil {
		return n, nil
	}
	return nil, vfs.ErrNotExist
}

// ReadDir implements vfs.Dir.
func (d *cronDir) ReadDir(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
	c := d.caller(cred)
	out := []vfs.DirEntry{{Name: "ctl", Node: d.ctl}, {Name: "err", Node: d.errv}}
	ts, err := d.tabs(ctx, c)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{"ctl": true, "err": true}
	for i := range ts {
		if !seen[ts[i].name] {
			seen[ts[i].name] = true
			out = append(out, vfs.DirEntry{Name: ts[i].name, Node: d.doc(&ts[i])})
		}
	}
	d.mu.Lock()
	var names []string
	for name := range d.temps[c.Uid] {
		if !seen[name] {
			names = append(names, name)
		}
	}
	d.mu.Unlock()
	sort.Strings(names)
	for _, name := range names {
		if n := d.temp(c, name); n != nil {
			out = append(out, vfs.DirEntry{Name: name, Node: n})
		}
	}
	return out, nil
}

// Create implements vfs.Creator. A name that is a crontab the caller may
// see opens it; any other name (that is no user's) is a scratch file of
// the caller's, kept in memory: editors write a temporary file and rename
// it over the crontab.
func (d *cronDir) Create(ctx context.Context, cred vfs.Cred, name string, flags int, perm fs.FileMode) (vfs.Node, vfs.Handle, error) {
	excl := flags&os.O_EXCL != 0
	open := func(f vfs.File) (vfs.Node, vfs.Handle, error) {
		if excl {
			return nil, nil, vfs.ErrExist
		}
		h, err := f.Open(ctx, cred, flags&^(os.O_CREATE|os.O_EXCL))
		if err != nil {
			return nil, nil, err
		}
		return f, h, nil
	}
	switch name {
	case "ctl":
		return open(d.ctl)
	case "err":
		return open(d.errv)
	}
	if err := validTempName(name); err != nil {
		return nil, nil, err
	}
	c := d.caller(cred)
	t, err := d.findTab(ctx, c, name)
	if err != nil {
		return nil, nil, err
	}
	if t != nil {
		return open(d.doc(t))
	}
	if n := d.temp(c, name); n != nil {
		return open(n)
	}
	if c.Role == "nobody" || !c.Can(abi.SchedCrontabSet.Name) {
		return nil, nil, vfs.ErrPermission
	}
	if d.isUser(ctx, name) {
		return nil, nil, vfs.Errorf(syscall.EACCES, "that is another user's crontab")
	}
	d.mu.Lock()
	d.sweepLocked()
	ts := d.tempsOfLocked(c.Uid)
	if f := ts[name]; f != nil { // made meanwhile
		d.mu.Unlock()
		return open(d.tempNode(c, name, f))
	}
	if len(ts) >= maxTemps {
		d.mu.Unlock()
		return nil, nil, errTooManyTemps()
	}
	f := &tempFile{mode: perm.Perm(), mtime: time.Now(), used: time.Now()}
	ts[name] = f
	d.mu.Unlock()
	n := d.tempNode(c, name, f)
	h, err := n.Open(ctx, cred, flags&^(os.O_CREATE|os.O_EXCL))
	if err != nil {
		return nil, nil, err
	}
	return n, h, nil
}

// Mkdir implements vfs.Creator: there are no directories here.
func (d *cronDir) Mkdir(ctx context.Context, cred vfs.Cred, name string, perm fs.FileMode) (vfs.Node, error) {
	return nil, vfs.Errorf(syscall.EPERM, "no directories in "+cronDirPath)
}

// Remove implements vfs.Remover: only scratch files can be removed; a
// crontab is emptied by writing it empty.
func (d *cronDir) Remove(ctx context.Context, cred vfs.Cred, name string, dir bool) error {
	c := d.caller(cred)
	d.mu.Lock()
	f := d.temps[c.Uid][name]
	if f != nil && !dir {
		delete(d.temps[c.Uid], name)
	}
	d.mu.Unlock()
	if f != nil {
		if dir {
			return vfs.ErrNotDir
		}
		return nil
	}
	if name == "ctl" || name == "err" {
		return vfs.Errorf(syscall.EPERM, "cannot remove "+name)
	}
	t, err := d.findTab(ctx, c, name)
	if err != nil {
		return err
	}
	if t != nil {
		return vfs.Errorf(syscall.EPERM, "a crontab cannot be removed: write it empty to remove every schedule")
	}
	return vfs.ErrNotExist
}

// Rename implements vfs.Renamer. Renaming a scratch file over a crontab
// writes the crontab with its content (and the scratch file goes);
// renaming a crontab to a scratch name (an editor's backup) copies its
// rendering there and leaves the crontab as it is; scratch files rename
// freely among themselves.
func (d *cronDir) Rename(ctx context.Context, cred vfs.Cred, name string, newDir vfs.Dir, newName string) error {
	if nd, ok := newDir.(*cronDir); !ok || nd != d {
		return vfs.Errorf(syscall.EXDEV, "cross-directory rename")
	}
	if name == "ctl" || name == "err" || newName == "ctl" || newName == "err" {
		return vfs.Errorf(syscall.EPERM, "cannot rename ctl or err")
	}
	c := d.caller(cred)
	srcTab, err := d.findTab(ctx, c, name)
	if err != nil {
		return err
	}
	dstTab, err := d.findTab(ctx, c, newName)
	if err != nil {
		return err
	}
	d.mu.Lock()
	src := d.temps[c.Uid][name]
	d.mu.Unlock()
	switch {
	case srcTab != nil && dstTab != nil:
		if srcTab.uid == dstTab.uid {
			return nil
		}
		return vfs.Errorf(syscall.EPERM, "cannot rename one crontab over another")
	case srcTab != nil:
		// An editor's backup: copy the rendering, keep the crontab.
		if err := validTempName(newName); err != nil {
			return err
		}
		if d.isUser(ctx, newName) {
			return vfs.Errorf(syscall.EACCES, "that is another user's crontab")
		}
		b, err := d.render(ctx, c, srcTab.uid)
		if err != nil {
			return err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		ts := d.tempsOfLocked(c.Uid)
		if ts[newName] == nil && len(ts) >= maxTemps {
			return errTooManyTemps()
		}
		ts[newName] = &tempFile{data: b, mode: 0o600, mtime: time.Now(), used: time.Now()}
		return nil
	case src == nil:
		return vfs.ErrNotExist
	case dstTab != nil:
		if err := d.doc(dstTab).Access(ctx, cred, vfs.WantWrite); err != nil {
			return err
		}
		if err := d.apply(ctx, c, dstTab.uid, src.bytes()); err != nil {
			return err
		}
		d.mu.Lock()
		if d.temps[c.Uid][name] == src {
			delete(d.temps[c.Uid], name)
		}
		d.mu.Unlock()
		return nil
	default:
		if err := validTempName(newName); err != nil {
			return err
		}
		if d.isUser(ctx, newName) {
			return vfs.Errorf(syscall.EACCES, "that is another user's crontab")
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		ts := d.temps[c.Uid]
		if ts[name] == src {
			delete(ts, name)
		}
		ts[newName] = src
		return nil
	}
}
