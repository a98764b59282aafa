package sandbox

import (
	"bufio"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// RemoveStale unmounts and removes the staging directories under RunDir
// of runtimes whose process is gone: those whose lock can be taken (and,
// for a directory of an older daemon without one, those whose pid is not
// alive). A daemon calls it as it starts, so that what a daemon killed
// outright left mounted goes before any session opens. It needs root;
// without it, it does nothing.
func RemoveStale(log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	if os.Geteuid() != 0 {
		return
	}
	ents, err := os.ReadDir(RunDir)
	if err != nil {
		return
	}
	for _, e := range ents {
		dir := filepath.Join(RunDir, e.Name())
		if !e.IsDir() || !stale(dir, e.Name()) {
			continue
		}
		UnmountUnder(dir)
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("sandbox: removing a stale staging directory", "dir", dir, "err", err)
		} else {
			log.Info("sandbox: removed the staging directory of a runtime that is gone", "dir", dir)
		}
	}
}

// stale says whether the staging directory dir (named name) belongs to
// no live runtime.
func stale(dir, name string) bool {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == nil {
		defer f.Close()
		// Taken, it is released as f closes; the directory is gone by then.
		return unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return false
	}
	// A directory being made has no lock yet; an older daemon's never
	// has one: its pid tells.
	pidText, _, ok := strings.Cut(name, "-")
	pid, err := strconv.Atoi(pidText)
	if !ok || err != nil || pid == os.Getpid() {
		return false
	}
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

// UnmountUnder detaches every mount at or below dir, deepest first.
func UnmountUnder(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		p := unescapeMountinfo(fields[4])
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		unix.Unmount(p, unix.MNT_DETACH)
	}
}

// unescapeMountinfo undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
