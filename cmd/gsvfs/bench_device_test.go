// Benchmarks of remote devices against ssh and sshfs on loopback,
// measured in the same run on the same data (issue 11, "Speed").
//
// Run (needs root, /dev/fuse, and Debian's openssh-server and sshfs,
// which it installs with apt-get when they are missing; it skips with the
// reason otherwise):
//
//	go test -run '^$' -bench Device -benchtime 1x -timeout 20m ./cmd/gsvfs/
//
// BenchmarkDevice sets up once, for all its sub-benchmarks:
//
//   - a throw-away host user gsvbench (a system user, shell /bin/sh, no
//     password: root's ~/.bashrc here would slow ssh's start-up), removed
//     at the end;
//   - the data, on tmpfs (/dev/shm), owned by that user: big.bin (100 MB),
//     tree/ (10,000 files in 100 directories) and repo/ (a git repository
//     of 3,000 committed files, clean);
//   - the kernel: `gsvfs mount MNT --listen tcp!127.0.0.1!PORT`, and a
//     node token bound to device id "bench";
//   - the device: `gsvfs device --kernel tcp!127.0.0.1!PORT --id bench
//     --root DATA`, a real process running as gsvbench, whose files are
//     MNT/dev/bench/fs/...;
//   - the baseline: a private sshd on 127.0.0.1 (a throw-away host key and
//     user key in a temporary directory, UsePAM no, Debian's sftp-server),
//     an ssh ControlMaster connection as gsvbench, and an sshfs mount of
//     DATA as gsvbench (sshfs's default options).
//
// Each sub-benchmark times ours and the baseline alternately, b.N of
// each, reversing the order every other iteration, and reports both and
// their ratio with b.ReportMetric; its own ns/op is ours. The summary
// printed at the end gives every ratio with its target and whether it is
// met.
//
//   - read100MB: read big.bin to its end (1 MiB reads) through
//     MNT/dev/bench/fs vs through the sshfs mount, each after
//     POSIX_FADV_DONTNEED of the file (no page cache of an earlier pass).
//     Reports ours-MB/s, sshfs-MB/s and ours/sshfs. Target ≥ 1.0.
//   - find10k: `find DIR -type f | wc -l` (10,000) over tree/ through
//     MNT/dev/bench/fs vs through sshfs. Our mount caches nothing (zero
//     FUSE timeouts); sshfs keeps a 20 s directory cache, so the sshfs
//     side is a fresh sshfs mount per iteration (mounted untimed): its
//     first find, as cold as ours. sshfs-warm-ms is a second find on that
//     mount right after (its cache warm), reported for information.
//     Target ours/sshfs ≤ 1.0 (cold).
//   - exec-true: shell.exec {"target":"bench","input":"true"} as a
//     request frame written to the kernel's /sys/call over 9P from this
//     process (the kernel's unix socket, one open/write/read/clunk per
//     call, as root) vs `ssh -o ControlPath=... gsvbench@127.0.0.1 true`
//     over the ControlMaster connection (a new ssh client process per
//     call). ours-cli-ms is the same call through `gsv call shell.exec`
//     (a process per call, like ssh), reported for information.
//     Target ours/ssh ≤ 1.0.
//   - git-status: shell.exec {"target":"bench","input":"git status",
//     "cwd":"repo"} the same way vs `ssh ... 'cd DATA/repo && git
//     status'`; both must say the tree is clean. Target ours/ssh ≤ 1.0.
//
// GSVFS_DEVBENCH_LOG=debug (or info) sets the kernel's and the device's
// log level and shows the device's log at the end.
//
// fs.search with a target runs on the device (Router.search →
// remoteDevice.Search → the device's call file), never over a walk of
// /dev/<id>/fs, so it is not measured here.
package main_test

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9/client"
	"golang.org/x/sys/unix"
)

// Targets of issue 11.
const (
	targetDevReadRatio = 1.0 // ours/sshfs throughput, at least
	targetDevFindRatio = 1.0 // ours/sshfs time, at most
	targetDevExecRatio = 1.0 // ours/ssh time, at most
	targetDevGitRatio  = 1.0 // ours/ssh time, at most
)

// Sizes of the data.
const (
	devBigSize   = 100 << 20
	devTreeDirs  = 100
	devTreeFiles = 100 // per directory: 10,000 in all
	devRepoDirs  = 30
	devRepoFiles = 100 // per directory: 3,000 in all
	devBenchUser = "gsvbench"
	devBenchID   = "bench"
)

// devEnv is what BenchmarkDevice sets up once.
type devEnv struct {
	data    string // the exported directory, owned by the bench user
	devFS   string // MNT/dev/bench/fs
	kernel  *daemon
	fsys    *client.Fsys // root's 9P connection to the kernel
	gsvAddr string       // GSV_ADDR of the kernel's unix socket
	ssh     *sshSide
}

// sshSide is the private sshd and its client side.
type sshSide struct {
	dir      string // keys, config, control socket
	port     int
	user     string
	data     string // the exported directory, as seen over ssh
	sshfsOpt string // -o options of sshfs
}

// sshArgs are the ssh client's options for a command over the
// ControlMaster connection.
func (s *sshSide) sshArgs(extra ...string) []string {
	args := []string{"-F", "/dev/null", "-p", strconv.Itoa(s.port), "-i", filepath.Join(s.dir, "id"),
		"-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
		"-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ControlPath=" + filepath.Join(s.dir, "cm")}
	return append(append(args, extra...), s.user+"@127.0.0.1")
}

// run runs cmd over the ControlMaster connection and returns its stdout.
func (s *sshSide) run(cmd string) (string, error) {
	c := exec.Command("ssh", append(s.sshArgs("-o", "ControlMaster=no"), cmd)...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return out.String(), fmt.Errorf("ssh %s: %v: %s", cmd, err, errb.String())
	}
	return out.String(), nil
}

// devSide is one contender of a device benchmark.
type devSide struct {
	name  string
	op    func() error
	total time.Duration
	n     int
}

func (s *devSide) ms() float64 {
	if s.n == 0 {
		return 0
	}
	return s.total.Seconds() * 1000 / float64(s.n)
}

// devInterleave runs every side's op once per iteration of b, reversing
// the order on every other iteration; before, if not nil, runs untimed
// before each iteration. An op's error fails b.
func devInterleave(b *testing.B, before func() error, sides ...*devSide) {
	b.Helper()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if before != nil {
			b.StopTimer()
			if err := before(); err != nil {
				b.Fatalf("iteration %d: %v", i, err)
			}
			b.StartTimer()
		}
		for j := range sides {
			s := sides[j]
			if i%2 == 1 {
				s = sides[len(sides)-1-j]
			}
			t0 := time.Now()
			err := s.op()
			s.total += time.Since(t0)
			s.n++
			if err != nil {
				b.StopTimer()
				b.Fatalf("%s (iteration %d): %v", s.name, i, err)
			}
		}
	}
	b.StopTimer()
}

// devSummary collects the summary lines of BenchmarkDevice's
// sub-benchmarks, by name; the last run of each (the largest b.N) wins.
var devSummary = map[string]string{}

func devVerdict(ok bool) string {
	if ok {
		return "MET"
	}
	return "MISSED"
}

func BenchmarkDevice(b *testing.B) {
	e := setupDevBench(b)
	clear(devSummary)

	b.Run("read100MB", func(b *testing.B) {
		ours := filepath.Join(e.devFS, "big.bin")
		var sshfsMnt string
		mountSSHFS(b, e.ssh, &sshfsMnt)
		theirs := filepath.Join(sshfsMnt, "big.bin")
		o := &devSide{name: "ours", op: func() error { return readCold(ours) }}
		s := &devSide{name: "sshfs", op: func() error { return readCold(theirs) }}
		devInterleave(b, nil, o, s)
		mb := float64(devBigSize) / (1 << 20)
		oursMBs, sshfsMBs := mb/(o.ms()/1000), mb/(s.ms()/1000)
		ratio := oursMBs / sshfsMBs
		b.ReportMetric(oursMBs, "ours-MB/s")
		b.ReportMetric(sshfsMBs, "sshfs-MB/s")
		b.ReportMetric(ratio, "ours/sshfs")
		devSummary["read100MB"] = fmt.Sprintf("ours %.0f MB/s, sshfs %.0f MB/s: ours/sshfs %.2f (target >= %.1f) %s  [n=%d]",
			oursMBs, sshfsMBs, ratio, targetDevReadRatio, devVerdict(ratio >= targetDevReadRatio), b.N)
	})

	b.Run("find10k", func(b *testing.B) {
		ours := filepath.Join(e.devFS, "tree")
		var sshfsMnt string
		var unmount func()
		remount := func() error {
			if unmount != nil {
				unmount()
			}
			var err error
			sshfsMnt, unmount, err = startSSHFS(e.ssh)
			return err
		}
		b.Cleanup(func() {
			if unmount != nil {
				unmount()
			}
		})
		o := &devSide{name: "ours", op: func() error { return findCount(ours, devTreeDirs*devTreeFiles) }}
		// The sshfs side's warm pass follows its cold one at once, on
		// the same mount, and is taken out of its time below.
		var warm time.Duration
		s := &devSide{name: "sshfs"}
		s.op = func() error {
			err := findCount(filepath.Join(sshfsMnt, "tree"), devTreeDirs*devTreeFiles)
			if err != nil {
				return err
			}
			t0 := time.Now()
			err = findCount(filepath.Join(sshfsMnt, "tree"), devTreeDirs*devTreeFiles)
			warm += time.Since(t0)
			return err
		}
		devInterleave(b, remount, o, s)
		// s.total holds the cold and the warm pass: take the warm out.
		s.total -= warm
		warmMs := warm.Seconds() * 1000 / float64(b.N)
		ratio := o.ms() / s.ms()
		b.ReportMetric(o.ms(), "ours-ms")
		b.ReportMetric(s.ms(), "sshfs-ms")
		b.ReportMetric(warmMs, "sshfs-warm-ms")
		b.ReportMetric(ratio, "ours/sshfs")
		devSummary["find10k"] = fmt.Sprintf("ours %.0f ms, sshfs %.0f ms (cold mount; warm %.0f ms, ours/warm %.2f): ours/sshfs %.2f (target <= %.1f) %s  [n=%d]",
			o.ms(), s.ms(), warmMs, o.ms()/warmMs, ratio, targetDevFindRatio, devVerdict(ratio <= targetDevFindRatio), b.N)
	})

	execArgs := map[string]any{"target": devBenchID, "input": "true"}
	execJSON, _ := json.Marshal(execArgs)
	b.Run("exec-true", func(b *testing.B) {
		o := &devSide{name: "ours (9P /sys/call)", op: func() error { return shellExec9p(e.fsys, execArgs, "") }}
		cli := &devSide{name: "ours (gsv call)", op: func() error { return shellExecCLI(e.gsvAddr, string(execJSON), "") }}
		s := &devSide{name: "ssh", op: func() error { _, err := e.ssh.run("true"); return err }}
		devInterleave(b, nil, o, cli, s)
		ratio := o.ms() / s.ms()
		b.ReportMetric(o.ms(), "ours-ms")
		b.ReportMetric(cli.ms(), "ours-cli-ms")
		b.ReportMetric(s.ms(), "ssh-ms")
		b.ReportMetric(ratio, "ours/ssh")
		devSummary["exec-true"] = fmt.Sprintf("ours %.2f ms (9P request frame to /sys/call from the benchmark process; via `gsv call` %.2f ms, %.2fx), ssh (ControlMaster) %.2f ms: ours/ssh %.2f (target <= %.1f) %s  [n=%d]",
			o.ms(), cli.ms(), cli.ms()/s.ms(), s.ms(), ratio, targetDevExecRatio, devVerdict(ratio <= targetDevExecRatio), b.N)
	})

	gitArgs := map[string]any{"target": devBenchID, "input": "git status", "cwd": "repo"}
	gitJSON, _ := json.Marshal(gitArgs)
	b.Run("git-status", func(b *testing.B) {
		const clean = "nothing to commit, working tree clean"
		o := &devSide{name: "ours (9P /sys/call)", op: func() error { return shellExec9p(e.fsys, gitArgs, clean) }}
		cli := &devSide{name: "ours (gsv call)", op: func() error { return shellExecCLI(e.gsvAddr, string(gitJSON), clean) }}
		s := &devSide{name: "ssh", op: func() error {
			out, err := e.ssh.run("cd '" + filepath.Join(e.ssh.data, "repo") + "' && git status")
			if err == nil && !strings.Contains(out, clean) {
				err = fmt.Errorf("git status over ssh: %q", out)
			}
			return err
		}}
		devInterleave(b, nil, o, cli, s)
		ratio := o.ms() / s.ms()
		b.ReportMetric(o.ms(), "ours-ms")
		b.ReportMetric(cli.ms(), "ours-cli-ms")
		b.ReportMetric(s.ms(), "ssh-ms")
		b.ReportMetric(ratio, "ours/ssh")
		devSummary["git-status"] = fmt.Sprintf("ours %.2f ms (9P request frame to /sys/call; via `gsv call` %.2f ms, %.2fx), ssh (ControlMaster) %.2f ms: ours/ssh %.2f (target <= %.1f) %s  [n=%d]",
			o.ms(), cli.ms(), cli.ms()/s.ms(), s.ms(), ratio, targetDevGitRatio, devVerdict(ratio <= targetDevGitRatio), b.N)
	})

	fmt.Println("\n=== gsvfs device benchmarks vs ssh/sshfs on loopback (same run, same data) ===")
	for _, n := range []string{"read100MB", "find10k", "exec-true", "git-status"} {
		if l, ok := devSummary[n]; ok {
			fmt.Printf("%-12s %s\n", n, l)
		}
	}
	fmt.Println()
}

// readCold drops p's pages from the page cache and reads it to its end
// in 1 MiB reads.
func readCold(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
	// Not io.Copy: io.Discard's ReadFrom would read in 8 KiB pieces.
	buf := make([]byte, 1<<20)
	n := 0
	for {
		m, err := f.Read(buf)
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
	}
	if n != devBigSize {
		return fmt.Errorf("read %d bytes of %s, want %d", n, p, devBigSize)
	}
	return nil
}

// findCount runs `find dir -type f` and checks it lists want files.
func findCount(dir string, want int) error {
	out, err := exec.Command("find", dir, "-type", "f").Output()
	if err != nil {
		return fmt.Errorf("find %s: %v", dir, err)
	}
	if n := bytes.Count(out, []byte{'\n'}); n != want {
		return fmt.Errorf("find %s: %d files, want %d", dir, n, want)
	}
	return nil
}

// shellExec9p makes shell.exec with args through the kernel's /sys/call
// over fsys and checks that the command completed with status 0 and, if
// want is not empty, that its output contains want.
func shellExec9p(fsys *client.Fsys, args map[string]any, want string) error {
	s, err := callRaw9p(fsys, "shell.exec", args)
	if err != nil {
		return err
	}
	var f callFrame
	if err := json.Unmarshal([]byte(strings.TrimSpace(s)), &f); err != nil {
		return fmt.Errorf("response frame %q: %v", s, err)
	}
	if !f.OK {
		return fmt.Errorf("shell.exec: %s", s)
	}
	return checkExec(f.Data, want)
}

// shellExecCLI is shellExec9p through `gsv call shell.exec ARGS`.
func shellExecCLI(addr, args, want string) error {
	c := exec.Command(gsvBin, "call", "shell.exec", args)
	c.Env = append(os.Environ(), "GSV_ADDR="+addr)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return fmt.Errorf("gsv call shell.exec: %v: %s", err, errb.String())
	}
	return checkExec(out.Bytes(), want)
}

// checkExec checks a shell.exec result.
func checkExec(data []byte, want string) error {
	var r struct {
		Status   string `json:"status"`
		ExitCode *int   `json:"exitCode"`
		Output   string `json:"output"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("shell.exec result %q: %v", data, err)
	}
	if r.Status != "completed" || r.ExitCode == nil || *r.ExitCode != 0 || !strings.Contains(r.Output, want) {
		return fmt.Errorf("shell.exec result: %s", data)
	}
	return nil
}

// setupDevBench sets up BenchmarkDevice's world (see the file's comment),
// torn down at the end of b; it skips b with the reason when something
// cannot be installed or run.
func setupDevBench(b *testing.B) *devEnv {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root: a throw-away host user, a private sshd, FUSE mounts")
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		b.Skipf("FUSE is not available: %v", err)
	}
	if err := installSSH(); err != nil {
		b.Skipf("openssh-server and sshfs: %v", err)
	}
	for _, tool := range []string{"git", "find", "ssh-keygen", "useradd", "userdel"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("needs %s: %v", tool, err)
		}
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err != nil || st.Type != 0x01021994 {
		b.Skipf("/dev/shm is not a tmpfs (%v)", err)
	}
	base, err := os.MkdirTemp("/dev/shm", "gsv-devbench-")
	if err != nil {
		b.Fatal(err)
	}
	os.Chmod(base, 0o755)
	b.Cleanup(func() { os.RemoveAll(base) })
	home := filepath.Join(base, "home")
	data := filepath.Join(base, "data")
	for _, d := range []string{home, data} {
		if err := os.Mkdir(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	uid, gid := benchUser(b, home)

	t0 := time.Now()
	if err := makeDevData(data); err != nil {
		b.Fatal(err)
	}
	if err := chownTree(base, uid, gid); err != nil {
		b.Fatal(err)
	}
	b.Logf("data in %s: %v", data, time.Since(t0).Round(time.Millisecond))

	// The kernel, with a TCP listener, and a node token bound to the
	// device's id, owned by root.
	port := freePort(b)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", port)
	logLevel := cmp.Or(os.Getenv("GSVFS_DEVBENCH_LOG"), "warn")
	k := startDaemon(b, newBase(b), daemonOpts{mount: true, listen: listen, logLevel: logLevel})
	fsys := k.dial(b)
	var tok struct {
		Token struct{ Token string }
	}
	mustOK(b, call9p(b, fsys, "sys.token.create", map[string]any{"kind": "node", "uid": 0, "allowedDeviceId": devBenchID}), &tok)

	// The device, as the bench user.
	startBenchDevice(b, uid, gid, home, "--kernel", listen, "--id", devBenchID, "--token", tok.Token.Token, "--root", data, "--log-level", logLevel)
	devFS := filepath.Join(k.mnt, "dev", devBenchID, "fs")
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(devFS, "big.bin")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the device's files did not appear at %s\nkernel:\n%s", devFS, k.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	e := &devEnv{data: data, devFS: devFS, kernel: k, fsys: fsys, gsvAddr: "unix!" + k.sock}
	e.ssh = startSSH(b, base, data)
	// Both sides answer before the clock starts.
	if err := shellExec9p(fsys, map[string]any{"target": devBenchID, "input": "true"}, ""); err != nil {
		b.Fatal(err)
	}
	if _, err := e.ssh.run("true"); err != nil {
		b.Fatal(err)
	}
	return e
}

// installSSH installs openssh-server and sshfs from Debian when they are
// missing.
func installSSH() error {
	have := func() bool {
		_, err1 := os.Stat("/usr/sbin/sshd")
		_, err2 := exec.LookPath("sshfs")
		_, err3 := exec.LookPath("ssh")
		return err1 == nil && err2 == nil && err3 == nil
	}
	if have() {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return errors.New("missing, and no apt-get to install them")
	}
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "openssh-server", "sshfs"}} {
		c := exec.Command("apt-get", args...)
		c.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	if !have() {
		return errors.New("still missing after apt-get install")
	}
	return nil
}

// benchUser creates the throw-away user gsvbench (a system user, shell
// /bin/sh, home home, a password that is not locked: sshd without PAM
// refuses a locked account's keys) and removes it at the end of b. A
// gsvbench left behind by an earlier run is removed first.
func benchUser(b *testing.B, home string) (uid, gid int) {
	b.Helper()
	if _, err := user.Lookup(devBenchUser); err == nil {
		exec.Command("userdel", devBenchUser).Run()
	}
	if out, err := exec.Command("useradd", "--system", "--user-group", "--shell", "/bin/sh", "--home-dir", home,
		"--no-create-home", "--password", "*", devBenchUser).CombinedOutput(); err != nil {
		b.Skipf("useradd %s: %v: %s", devBenchUser, err, out)
	}
	b.Cleanup(func() {
		if out, err := exec.Command("userdel", devBenchUser).CombinedOutput(); err != nil {
			b.Logf("userdel %s: %v: %s", devBenchUser, err, out)
		}
	})
	u, err := user.Lookup(devBenchUser)
	if err != nil {
		b.Fatal(err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid
}

// chownTree gives everything under dir to uid:gid.
func chownTree(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// makeDevData writes big.bin, tree/ and repo/ (committed) in dir.
func makeDevData(dir string) error {
	big := make([]byte, devBigSize)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(big)
	if err := os.WriteFile(filepath.Join(dir, "big.bin"), big, 0o644); err != nil {
		return err
	}
	for i := range devTreeDirs {
		d := filepath.Join(dir, "tree", fmt.Sprintf("d%03d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for j := range devTreeFiles {
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.txt", j)), []byte(fmt.Sprintf("file %d/%d\n", i, j)), 0o644); err != nil {
				return err
			}
		}
	}
	repo := filepath.Join(dir, "repo")
	for i := range devRepoDirs {
		d := filepath.Join(repo, fmt.Sprintf("pkg%02d", i))
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		for j := range devRepoFiles {
			src := fmt.Sprintf("package pkg%02d\n\n// F%03d is file %d of package %d.\nfunc F%03d() int { return %d }\n", i, j, j, i, j, i*1000+j)
			if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%03d.go", j)), []byte(src), 0o644); err != nil {
				return err
			}
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "commit", "-q", "-m", "3,000 files"},
	} {
		c := exec.Command("git", args...)
		c.Dir = repo
		c.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// startBenchDevice starts gsvfs device with args as uid:gid with HOME
// home, killed at the end of b.
func startBenchDevice(b *testing.B, uid, gid int, home string, args ...string) {
	b.Helper()
	stderr := &syncBuffer{}
	cmd := exec.Command(gsvfsBin, append([]string{"device"}, args...)...)
	cmd.Dir = home
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "USER=" + devBenchUser, "LOGNAME=" + devBenchUser, "LANG=C.UTF-8"}
	cmd.Stderr = stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}},
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(stderr, "(the device exited at %s: %v)\n", time.Now().Format(time.RFC3339Nano), err)
		close(done)
	}()
	b.Cleanup(func() {
		fmt.Fprintf(stderr, "(SIGTERM at %s)\n", time.Now().Format(time.RFC3339Nano))
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if b.Failed() || os.Getenv("GSVFS_DEVBENCH_LOG") != "" {
			b.Logf("device log:\n%s", stderr.String())
		}
	})
}

// startSSH starts a private sshd on 127.0.0.1 (keys and config in
// base/ssh) and a ControlMaster connection as the bench user to it; both
// end with b.
func startSSH(b *testing.B, base, data string) *sshSide {
	b.Helper()
	s := &sshSide{dir: filepath.Join(base, "ssh"), port: freePort(b), user: devBenchUser, data: data}
	// 0755: sshd reads authorized_keys as the user.
	if err := os.Mkdir(s.dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, k := range []string{"host", "id"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gsvbench-"+k, "-f", filepath.Join(s.dir, k)).CombinedOutput(); err != nil {
			b.Skipf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(s.dir, "id.pub"))
	if err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), pub, 0o644); err != nil {
		b.Fatal(err)
	}
	sftp := "/usr/lib/openssh/sftp-server"
	if _, err := os.Stat(sftp); err != nil {
		sftp = "internal-sftp"
	}
	conf := strings.Join([]string{
		"Port " + strconv.Itoa(s.port),
		"ListenAddress 127.0.0.1",
		"HostKey " + filepath.Join(s.dir, "host"),
		"PidFile " + filepath.Join(s.dir, "sshd.pid"),
		"AuthorizedKeysFile " + filepath.Join(s.dir, "authorized_keys"),
		"AllowUsers " + devBenchUser,
		"StrictModes no",
		"UsePAM no",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PrintMotd no",
		"PrintLastLog no",
		"UseDNS no",
		"Subsystem sftp " + sftp,
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(s.dir, "sshd_config"), []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	os.MkdirAll("/run/sshd", 0o755) // sshd's privilege separation directory
	sshd := exec.Command("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(s.dir, "sshd_config"))
	sshdLog := &syncBuffer{}
	sshd.Stderr = sshdLog
	sshd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := sshd.Start(); err != nil {
		b.Skipf("sshd: %v", err)
	}
	sshdDone := make(chan struct{})
	go func() { sshd.Wait(); close(sshdDone) }()
	b.Cleanup(func() {
		sshd.Process.Signal(syscall.SIGTERM)
		select {
		case <-sshdDone:
		case <-time.After(5 * time.Second):
			sshd.Process.Kill()
			<-sshdDone
		}
		if b.Failed() {
			b.Logf("sshd log:\n%s", sshdLog.String())
		}
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-sshdDone:
			b.Skipf("sshd exited: %s", sshdLog.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Skipf("sshd does not listen: %s", sshdLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The ControlMaster connection.
	master := exec.Command("ssh", s.sshArgs("-N", "-o", "ControlMaster=yes", "-o", "ControlPersist=no")...)
	masterLog := &syncBuffer{}
	master.Stderr = masterLog
	master.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := master.Start(); err != nil {
		b.Fatal(err)
	}
	masterDone := make(chan struct{})
	go func() { master.Wait(); close(masterDone) }()
	b.Cleanup(func() {
		exec.Command("ssh", s.sshArgs("-O", "exit")...).Run()
		select {
		case <-masterDone:
		case <-time.After(5 * time.Second):
			master.Process.Kill()
			<-masterDone
		}
	})
	for {
		if exec.Command("ssh", s.sshArgs("-O", "check")...).Run() == nil {
			break
		}
		select {
		case <-masterDone:
			b.Fatalf("the ssh ControlMaster exited: %s\nsshd: %s", masterLog.String(), sshdLog.String())
		default:
		}
		if time.Now().After(deadline) {
			b.Fatalf("the ssh ControlMaster is not up: %s\nsshd: %s", masterLog.String(), sshdLog.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.sshfsOpt = strings.Join([]string{"port=" + strconv.Itoa(s.port), "IdentityFile=" + filepath.Join(s.dir, "id"),
		"IdentitiesOnly=yes", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "BatchMode=yes",
		"LogLevel=ERROR", "ControlPath=none"}, ",")
	return s
}

// startSSHFS mounts s's data with sshfs (its default options) on a new
// directory and returns it and how to unmount it.
func startSSHFS(s *sshSide) (mnt string, unmount func(), err error) {
	mnt, err = os.MkdirTemp("", "gsv-sshfs-")
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command("sshfs", "-f", "-F", "/dev/null", "-o", s.sshfsOpt, s.user+"@127.0.0.1:"+s.data, mnt)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		os.Remove(mnt)
		return "", nil, fmt.Errorf("sshfs: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	unmount = func() {
		if err := syscall.Unmount(mnt, 0); err != nil {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		os.Remove(mnt)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		var st syscall.Statfs_t
		if syscall.Statfs(mnt, &st) == nil && st.Type == 0x65735546 {
			if _, err := os.Stat(filepath.Join(mnt, "big.bin")); err == nil {
				return mnt, unmount, nil
			}
		}
		select {
		case <-done:
			os.Remove(mnt)
			return "", nil, fmt.Errorf("sshfs exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			unmount()
			return "", nil, fmt.Errorf("sshfs not mounted within 15 s: %s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// mountSSHFS mounts s's data with sshfs for the whole of b and sets *mnt.
func mountSSHFS(b *testing.B, s *sshSide, mnt *string) {
	b.Helper()
	m, unmount, err := startSSHFS(s)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(unmount)
	*mnt = m
}
