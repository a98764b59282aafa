package local

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local/sandbox"
	"gsvfs.dev/gsvfs/vfs"
)

// What a session may ask: the process capability, the mounts as the
// caller may have them, and the checks of guest paths, environment and
// labels.

// errWiderSession is the refusal of a command in a session started with
// more than the caller's process capability allows (a token's narrower
// one, an agent's narrowed work, config narrowed since).
const errWiderSession = "this session was started with more than your process capability allows: start one of your own"

// processCap is who's process capability, the default if the host gave
// none.
func (who Who) processCap() abi.ProcessCap {
	if who.Process != nil {
		return *who.Process
	}
	return DefaultProcessCap(who.IsRoot())
}

// DefaultProcessCap is the process capability a user has unless config
// narrows it: both network modes, mounts anywhere in the namespace (the
// files' own permissions decide) and, for root, host paths too.
func DefaultProcessCap(root bool) abi.ProcessCap {
	pc := abi.ProcessCap{
		Networks: []string{abi.NetworkNone, abi.NetworkFull},
		Mounts:   []abi.CapMount{{Prefix: "/", Mode: abi.MountRW}},
	}
	if root {
		pc.Mounts = append(pc.Mounts, abi.CapMount{Prefix: "host:/", Mode: abi.MountRW})
	}
	return pc
}

// HostWide says whether pc allows all that a command run on a host
// has: the host's network, and every namespace path read-write (for
// root, every host path too). A narrower capability binds a command:
// shell.exec then runs it in a sandbox (root's too), and refuses it on a
// device, whose commands run unsandboxed on the device's host.
func HostWide(pc abi.ProcessCap, root bool) bool {
	if !slices.Contains(pc.Networks, abi.NetworkFull) {
		return false
	}
	wide := func(prefix string) bool {
		return slices.ContainsFunc(pc.Mounts, func(m abi.CapMount) bool {
			return strings.TrimSuffix(m.Prefix, "/")+"/" == prefix && m.Mode == abi.MountRW
		})
	}
	return wide("/") && (!root || wide("host:/"))
}

// capMode is the strongest mode pc allows for the namespace path p
// (host: for a raw host path), "" if none.
func capMode(pc abi.ProcessCap, who Who, p string) string {
	best := ""
	for _, m := range pc.Mounts {
		prefix := m.Prefix
		if prefix == "~" || strings.HasPrefix(prefix, "~/") {
			prefix = who.Home + prefix[1:]
		}
		host := strings.HasPrefix(prefix, "host:")
		if host != strings.HasPrefix(p, "host:") {
			continue
		}
		pp, pre := strings.TrimPrefix(p, "host:"), strings.TrimPrefix(prefix, "host:")
		if pre == "/" || pp == pre || strings.HasPrefix(pp, strings.TrimSuffix(pre, "/")+"/") {
			if m.Mode == abi.MountRW {
				return abi.MountRW
			}
			if m.Mode == abi.MountRO {
				best = abi.MountRO
			}
		}
	}
	return best
}

// sessionMounts resolves and checks each mount for who and opens its
// directory; it returns them with the mounts as applied.
func (x *Sessions) sessionMounts(ctx context.Context, who Who, pc abi.ProcessCap, ms []abi.ProcessMount) ([]sandbox.Mount, []abi.ProcessMount, error) {
	var out []sandbox.Mount
	applied := []abi.ProcessMount{}
	guests := map[string]bool{}
	for _, m := range ms {
		if m.Mode != abi.MountRO && m.Mode != abi.MountRW {
			return out, nil, abi.E(abi.Path(m.HostPath), abi.Invalid, fmt.Sprintf("mode %q: want ro or rw", m.Mode))
		}
		if err := checkGuest(m.GuestPath, false); err != nil {
			return out, nil, abi.E(abi.Path(m.GuestPath), err)
		}
		if guests[path.Clean(m.GuestPath)] {
			return out, nil, abi.E(abi.Path(m.GuestPath), abi.Invalid, "guest_path mounted twice")
		}
		guests[path.Clean(m.GuestPath)] = true
		dir, mode, shown, err := x.mount(ctx, who, pc, m)
		if err != nil {
			return out, nil, err
		}
		// A raw host path (root's) is idmapped: the host's root-owned
		// files are root's sandbox's own, as root's authority there is.
		out = append(out, sandbox.Mount{Dir: dir, Guest: path.Clean(m.GuestPath), RW: mode == abi.MountRW,
			IDMap: strings.HasPrefix(shown, "host:") && !x.rootless})
		applied = append(applied, abi.ProcessMount{HostPath: shown, GuestPath: path.Clean(m.GuestPath), Mode: mode})
	}
	return out, applied, nil
}

// mountDir opens the directory of mount m for who, following no symbolic
// link, and returns it with the mode it gets and its path as shown.
func (d *Device) mountDir(ctx context.Context, who Who, pc abi.ProcessCap, m abi.ProcessMount) (*os.File, string, string, error) {
	p, err := clean(who, m.HostPath)
	if err != nil {
		return nil, "", "", err
	}
	rel := strings.TrimPrefix(p, "/")
	if !inData(rel) {
		if !who.IsRoot() {
			return nil, "", "", abi.E(abi.Path(p), abi.Permission,
				"only a directory of /home, /workspaces or /var/sessions can be mounted (raw host paths are root's)")
		}
		mode := capMode(pc, who, "host:"+p)
		if mode == "" {
			return nil, "", "", abi.E(abi.Path(p), abi.Permission, "your process capability allows no mount of this host path")
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, p, &unix.OpenHow{
			Flags: uint64(unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_SYMLINKS})
		if err != nil {
			return nil, "", "", abi.E(abi.Path(p), err)
		}
		return os.NewFile(uintptr(fd), p), minMode(m.Mode, mode), "host:" + p, nil
	}
	mode := capMode(pc, who, p)
	if mode == "" {
		return nil, "", "", abi.E(abi.Path(p), abi.Permission, "your process capability allows no mount of this path")
	}
	fi, err := d.access(ctx, who, rel, 0)
	if err != nil {
		return nil, "", "", err
	}
	if !fi.IsDir() {
		return nil, "", "", abi.E(abi.Path(p), abi.Invalid, "not a directory: a session mounts directories")
	}
	if _, err := d.usableInfo(ctx, who, rel, vfs.WantRead|vfs.WantExec, fi); err != nil {
		return nil, "", "", err
	}
	mode = minMode(m.Mode, mode)
	if mode == abi.MountRW && !who.IsRoot() && d.ownerOf(ctx, rel).Uid != who.Uid {
		mode = abi.MountRO // rw only in a tree the caller owns
	}
	if user := homeUser(rel); mode == abi.MountRW && user != "" && d.homeOver(ctx, user) {
		mode = abi.MountRO // a home at its quota takes no more from a sandbox
	}
	fd, err := d.openPath(rel)
	if err != nil {
		return nil, "", "", abi.E(abi.Path(p), err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		unix.Close(fd)
		return nil, "", "", abi.E(abi.Path(p), abi.Invalid, "not a directory (or it changed)")
	}
	return os.NewFile(uintptr(fd), d.dataPath+"/"+rel), mode, p, nil
}

// minMode is the weaker of two modes.
func minMode(a, b string) string {
	if a == abi.MountRW && b == abi.MountRW {
		return abi.MountRW
	}
	return abi.MountRO
}

// checkGuest checks a guest path: absolute, clean, no "..", and (for a
// mount) not / nor over the base system.
func checkGuest(p string, workdir bool) error {
	if p == "" || !strings.HasPrefix(p, "/") || !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
		return abi.E(abi.Invalid, fmt.Sprintf("guest path %q: want an absolute path", p))
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return abi.E(abi.Invalid, "guest paths may not contain '..'")
		}
	}
	if workdir {
		return nil
	}
	c := path.Clean(p)
	if c == "/" {
		return abi.E(abi.Invalid, "a mount may not be at /")
	}
	if c == "/var/sessions" || strings.HasPrefix(c, "/var/sessions/") {
		return nil // the namespace's own path, beside the sandbox's /var/tmp
	}
	for _, r := range guestReserved {
		if c == r || strings.HasPrefix(c, r+"/") {
			return abi.E(abi.Invalid, fmt.Sprintf("guest path %s is the sandbox's own (%s)", c, r))
		}
	}
	return nil
}

// checkEnv checks an environment variable.
func checkEnv(k, v string) error {
	if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) || !utf8.ValidString(k) {
		return abi.E(abi.Invalid, fmt.Sprintf("environment variable %q: a name without '=' or NUL, a value without NUL", k))
	}
	return nil
}

// checkLabel checks a label.
func checkLabel(k, v string) error {
	if k == "" || len(k) > 64 || len(v) > 256 || strings.ContainsAny(k+v, "\x00\n\r") || !utf8.ValidString(k+v) {
		return abi.E(abi.Invalid, fmt.Sprintf("label %q: a name of at most 64 bytes and a value of 256, one line of UTF-8", k))
	}
	return nil
}
