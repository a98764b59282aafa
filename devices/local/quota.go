package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
)

// Quotas: what one user may keep on the local device's disk (and, for a
// sandbox's scratch, in memory), so that no user fills it for the others.
// A write over a quota fails with EDQUOT for that user only; see
// docs/sessions.md, "Quotas".

// Quota is what one user may keep, in bytes; 0 is no limit.
type Quota struct {
	// Home bounds the user's home (/home/<user>): the sizes of its files
	// as the daemon writes them (FUSE, 9P, fs.write).
	Home int64
	// Tmp is the size of the tmpfs that holds the scratch of every
	// sandbox of the user (each session's and shell command's /tmp and
	// own home).
	Tmp int64
	// Output bounds the exec output kept for the user: the captures of
	// running execs and the blobs their sessions hold.
	Output int64
}

// DefaultQuota is a user's quota unless the host says otherwise: no limit
// on the home, 512 MiB of sandbox scratch, 1 GiB of kept output.
var DefaultQuota = Quota{Tmp: 512 << 20, Output: 1 << 30}

// QuotaFunc returns uid's quota; an error is the answer of the operation
// that asked (never a wider quota).
type QuotaFunc func(ctx context.Context, uid uint32) (Quota, error)

// ParseQuota parses a quota: a positive number of bytes, optionally with
// a suffix K, M, G or T (powers of 1024, "KiB" and "KB" alike), or "none"
// for no limit (0).
func ParseQuota(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if strings.EqualFold(t, "none") {
		return 0, nil
	}
	u := strings.ToUpper(t)
	u = strings.TrimSuffix(strings.TrimSuffix(u, "B"), "I")
	mult := int64(1)
	if n := len(u); n > 0 {
		switch u[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			u = u[:n-1]
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(u), 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("quota %q: want a positive size (bytes, or with K, M, G or T) or none", s)
	}
	return n * mult, nil
}

// quotaOf is uid's quota: the host's, DefaultQuota without one.
func (x *Sessions) quotaOf(ctx context.Context, uid uint32) (Quota, error) {
	if x.quota == nil {
		return DefaultQuota, nil
	}
	q, err := x.quota(ctx, uid)
	if err != nil {
		return Quota{}, abi.E(abi.Op("quota"), err)
	}
	return q, nil
}

// errQuota is the error of a write over a quota: EDQUOT, with what was
// full.
func errQuota(what string, limit int64) error {
	return fmt.Errorf("%s is at its quota of %d bytes: %w", what, limit, syscall.EDQUOT)
}

// The kept output: a count per user of the bytes held by running
// captures and by the blobs their sessions hold.

// outputUse counts each user's kept output.
type outputUse struct {
	mu   sync.Mutex
	used map[uint32]int64
}

// reserve takes up to n bytes of uid's room under limit (0: no limit)
// and returns how many it took.
func (o *outputUse) reserve(uid uint32, n, limit int64) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.used == nil {
		o.used = map[uint32]int64{}
	}
	if limit > 0 {
		n = max(min(n, limit-o.used[uid]), 0)
	}
	o.used[uid] += n
	return n
}

// release gives n bytes back to uid.
func (o *outputUse) release(uid uint32, n int64) {
	if n == 0 {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.used[uid] -= n
	if o.used[uid] <= 0 {
		delete(o.used, uid)
	}
}

// usedBy is what uid keeps.
func (o *outputUse) usedBy(uid uint32) int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.used[uid]
}

// The sandbox scratch of each user: a tmpfs of Quota.Tmp bytes at
// <state>/sessions/<uid>, mounted at the first sandbox of the user (a
// root daemon only), resized when the quota changes, unmounted when the
// sessions close.

// scratchMounts are the tmpfs mounts of users' scratch roots.
type scratchMounts struct {
	mu   sync.Mutex
	size map[string]int64 // mounted scratch root -> its size
}

// scratch returns the scratch root of uid, its tmpfs mounted (or
// resized) to uid's Tmp quota first when the daemon is root. A rootless
// daemon's scratch is a directory of its state (no quota: it cannot
// mount).
func (x *Sessions) scratch(ctx context.Context, uid uint32) (string, error) {
	root := x.scratchRoot(uid)
	if x.rootless || os.Geteuid() != 0 {
		return root, nil
	}
	q, err := x.quotaOf(ctx, uid)
	if err != nil {
		return "", err
	}
	size := q.Tmp
	if size <= 0 {
		size = 0 // tmpfs: size=0 is no limit
	}
	x.tmpfs.mu.Lock()
	defer x.tmpfs.mu.Unlock()
	if x.tmpfs.size == nil {
		x.tmpfs.size = map[string]int64{}
	}
	cur, mounted := x.tmpfs.size[root]
	switch {
	case mounted && cur == size:
	case mounted:
		// A new quota: resized in place (a tmpfs cannot shrink below
		// what it holds: it then keeps its size, and a later sandbox
		// tries again).
		if err := unix.Mount("", root, "", unix.MS_REMOUNT|unix.MS_NOSUID|unix.MS_NODEV, "size="+strconv.FormatInt(size, 10)); err != nil {
			x.log.Warn("sandbox scratch: resizing to a new quota", "uid", uid, "size", size, "err", err)
		} else {
			x.tmpfs.size[root] = size
		}
	default:
		if err := os.MkdirAll(root, 0o700); err != nil {
			return "", abi.E(abi.Op("scratch"), err)
		}
		if err := unix.Mount("gsv-scratch", root, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV,
			"mode=0700,size="+strconv.FormatInt(size, 10)); err != nil {
			return "", abi.E(abi.Op("scratch"), fmt.Errorf("a tmpfs for the sandboxes' scratch: %w", err))
		}
		x.tmpfs.size[root] = size
	}
	return root, nil
}

// unmountScratch unmounts every scratch tmpfs.
func (x *Sessions) unmountScratch() {
	x.tmpfs.mu.Lock()
	defer x.tmpfs.mu.Unlock()
	for root := range x.tmpfs.size {
		if err := unix.Unmount(root, unix.MNT_DETACH); err != nil && err != unix.EINVAL && err != unix.ENOENT {
			x.log.Warn("sandbox scratch: unmounting", "dir", root, "err", err)
		}
	}
	x.tmpfs.size = nil
}

// The homes: each user's usage, counted once by a walk and then kept up
// to date by the daemon's own writes; a sandbox that wrote marks it
// stale, to be counted again at the next write that needs it.

// homeUse is the usage of one home. mu is held while it is counted, so
// that a walk of one home makes only that home's writers wait.
type homeUse struct {
	mu    sync.Mutex
	bytes int64
	known bool        // counted since the last change unseen
	stale atomic.Bool // a sandbox may have written: count again
}

// homeUsage holds the usage of the homes with a quota.
type homeUsage struct {
	mu sync.Mutex
	m  map[string]*homeUse // by user name
}

// homeUser is the user whose home holds rel ("home/<user>/..."), "" if
// rel is in none.
func homeUser(rel string) string {
	rest, ok := strings.CutPrefix(rel, "home/")
	if !ok || rest == "" {
		return ""
	}
	user, _, _ := strings.Cut(rest, "/")
	return user
}

// homeLimit is the home quota of user (0: none).
func (d *Device) homeLimit(ctx context.Context, user string) (int64, error) {
	if d.Sessions.quota == nil {
		return DefaultQuota.Home, nil
	}
	o := d.ownerOf(ctx, "home/"+user)
	if o.User != user {
		return 0, nil // no such user: root's tree
	}
	q, err := d.quotaOf(ctx, o.Uid)
	return q.Home, err
}

// homeEntry is the usage record of user's home.
func (d *Device) homeEntry(user string) *homeUse {
	d.homes.mu.Lock()
	defer d.homes.mu.Unlock()
	if d.homes.m == nil {
		d.homes.m = map[string]*homeUse{}
	}
	u := d.homes.m[user]
	if u == nil {
		u = &homeUse{}
		d.homes.m[user] = u
	}
	return u
}

// countLocked brings u up to date, counting user's home if it is not
// known; u.mu is held.
func (d *Device) countLocked(u *homeUse, user string) error {
	if u.stale.Swap(false) {
		u.known = false
	}
	if u.known {
		return nil
	}
	n, err := d.countHome(user)
	if err != nil {
		return err
	}
	u.bytes, u.known = n, true
	return nil
}

// chargeHome counts what a write makes the home holding rel grow (the
// bytes grow returns, asked only of a home with a quota), or fails with
// EDQUOT if they would take it over its quota. A home without a quota is
// not counted.
func (d *Device) chargeHome(ctx context.Context, rel string, grow func() int64) error {
	user := homeUser(rel)
	if user == "" {
		return nil
	}
	limit, err := d.homeLimit(ctx, user)
	if err != nil {
		return abi.E(abi.Path("/"+rel), err)
	}
	if limit <= 0 {
		d.staleHome(user, false) // not kept up to date without a quota
		return nil
	}
	n := grow()
	if n <= 0 {
		d.creditHome(rel, -n)
		return nil
	}
	u := d.homeEntry(user)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := d.countLocked(u, user); err != nil {
		return abi.E(abi.Path("/home/"+user), err)
	}
	if u.bytes+n > limit {
		return abi.E(abi.Path("/"+rel), errQuota("the home /home/"+user, limit))
	}
	u.bytes += n
	return nil
}

// creditHome counts n bytes fewer in the home holding rel (a file
// removed or cut), if its usage is kept.
func (d *Device) creditHome(rel string, n int64) {
	user := homeUser(rel)
	if user == "" || n <= 0 {
		return
	}
	d.homes.mu.Lock()
	u := d.homes.m[user]
	d.homes.mu.Unlock()
	if u == nil {
		return
	}
	u.mu.Lock()
	if u.known {
		u.bytes = max(u.bytes-n, 0)
	}
	u.mu.Unlock()
}

// homeOver says whether the home of user is at or over its quota
// (counting it if it is not known).
func (d *Device) homeOver(ctx context.Context, user string) bool {
	limit, err := d.homeLimit(ctx, user)
	if err != nil || limit <= 0 {
		return false
	}
	u := d.homeEntry(user)
	u.mu.Lock()
	defer u.mu.Unlock()
	if err := d.countLocked(u, user); err != nil {
		return false
	}
	return u.bytes >= limit
}

// staleHome marks the usage of user's home (every home, for root) to be
// counted again: a sandbox may have written there.
func (d *Device) staleHome(user string, root bool) {
	d.homes.mu.Lock()
	defer d.homes.mu.Unlock()
	if !root {
		if u := d.homes.m[user]; u != nil {
			u.stale.Store(true)
		}
		return
	}
	for _, u := range d.homes.m {
		u.stale.Store(true)
	}
}

// countHome sums the sizes of the regular files of user's home, following
// no link (as du --apparent-size, each name of a hard-linked file
// counted).
func (d *Device) countHome(user string) (int64, error) {
	f, err := d.openData("home/"+user, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	return countDir(f)
}

// countDir sums the sizes of the regular files beneath the open
// directory f.
func countDir(f *os.File) (int64, error) {
	names, err := f.Readdirnames(-1)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(int(f.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue // gone meanwhile
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFREG:
			total += st.Size
		case unix.S_IFDIR:
			fd, err := unix.Openat(int(f.Fd()), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // unreadable or gone: not counted
			}
			sub := os.NewFile(uintptr(fd), filepath.Join(f.Name(), name))
			n, err := countDir(sub)
			sub.Close()
			if err != nil {
				continue
			}
			total += n
		}
	}
	return total, nil
}

// fileSize is the size of the open file f, -1 if it cannot be had.
func fileSize(f *os.File) int64 {
	fi, err := f.Stat()
	if err != nil {
		return -1
	}
	return fi.Size()
}
