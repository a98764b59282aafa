package main_test

// Quotas and a full disk through the real mount: a home's quota is
// EDQUOT to its owner alone, over FUSE and 9P; a full state disk is
// ENOSPC, for data files and for ctl writes that SQLite cannot store.

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"9fans.net/go/plan9"
)

func TestE2EQuota(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	root := d.dial(t)
	addUser(t, root, "alice", aliceHost)
	addUser(t, root, "bob", bobHost)
	d.mustGsv(t, "config", "set", "users/1000/quota/home", "64K")

	// FUSE: a write that would take alice's home past 64 KiB fails whole.
	r := d.shAs(aliceHost, `head -c 40000 /dev/zero > "$1/a" && echo a-ok; head -c 40000 /dev/zero > "$1/b" || echo b-refused`, d.p("/home/alice"))
	if !strings.Contains(r.stdout, "a-ok") || !strings.Contains(r.stdout, "b-refused") || !strings.Contains(r.stderr, "Disk quota exceeded") {
		t.Fatalf("alice's writes over FUSE past her home's quota: %v", r)
	}
	if r := d.shAs(aliceHost, `truncate -s 1G "$1/a"`, d.p("/home/alice")); r.code == 0 || !strings.Contains(r.stderr, "Disk quota exceeded") {
		t.Fatalf("a truncate past the quota: %v", r)
	}
	// Rewriting a file (open O_TRUNC) counts its new size only.
	if r := d.shAs(aliceHost, `for i in 1 2 3 4 5; do head -c 40000 /dev/zero > "$1/a" || exit 1; done; echo ok`, d.p("/home/alice")); r.stdout != "ok\n" {
		t.Fatalf("rewriting a file within the quota: %v", r)
	}
	// bob's home has no quota: his writes go on.
	if r := d.shAs(bobHost, `head -c 200000 /dev/zero > "$1/big" && echo ok`, d.p("/home/bob")); r.stdout != "ok\n" {
		t.Fatalf("bob's write: %v", r)
	}
	// 9P: the same refusal, as the Rerror.
	fid, err := root.Create("/home/alice/c", plan9.OWRITE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fid.Write(make([]byte, 40000))
	fid.Close()
	if err == nil || !strings.Contains(err.Error(), "disk quota exceeded") {
		t.Fatalf("a 9P write past alice's quota: %v", err)
	}
	// Freeing room lets writes in again.
	if r := d.shAs(aliceHost, `rm "$1/a" && head -c 40000 /dev/zero > "$1/b" && echo ok`, d.p("/home/alice")); r.stdout != "ok\n" {
		t.Fatalf("a write after freeing room: %v", r)
	}
	d.stop()
}

// A full state disk answers ENOSPC, not EIO: data-file writes, and ctl
// writes whose change SQLite cannot store.
func TestE2EDiskFull(t *testing.T) {
	requireRoot(t)
	requireFUSE(t)
	base := newBase(t)
	state := filepath.Join(base, "state")
	if err := syscall.Mount("gsv-e2e-state", state, "tmpfs", 0, "size=24m"); err != nil {
		t.Skipf("a small state disk (tmpfs): %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(state, syscall.MNT_DETACH) })
	d := startDaemon(t, base, daemonOpts{mount: true})
	// Fill the disk from outside the daemon.
	filler := filepath.Join(state, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	for buf := make([]byte, 1<<20); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	for buf := make([]byte, 4096); ; {
		if _, err := f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	r := d.sh(`/bin/echo hello > "$1"`, d.p("/home/root/x")) // (dash calls every write error "I/O error")
	if r.code == 0 || !strings.Contains(r.stderr, "No space left on device") {
		t.Errorf("a data write on a full disk: %v", r)
	}
	// SQLite may have room left in its files: set keys until it has none.
	r = d.sh(`i=0; while [ $i -lt 500 ]; do i=$((i+1)); /bin/echo "set users/0/ai/k$i $(head -c 30000 /dev/zero | tr '\0' x)" > "$1" || exit 1; done`, d.p("/sys/config/ctl"))
	if r.code == 0 || !strings.Contains(r.stderr, "No space left on device") || strings.Contains(r.stderr, "Input/output error") {
		t.Errorf("a ctl write SQLite cannot store on a full disk: %v", r)
	}
	os.Remove(filler)
	if r := d.sh(`echo hello > "$1" && cat "$1"`, d.p("/home/root/x")); r.stdout != "hello\n" {
		t.Fatalf("a write once there is room again: %v", r)
	}
	d.stop()
}
