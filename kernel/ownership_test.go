package kernel

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestOwnershipFencing: two nodes (stores on one database) and one
// resource. The first node's lease keeps the second out until it
// expires; then the second takes it with the next epoch, and the first
// node, waking as if from a pause past its lease, can neither write (its
// fenced transaction is refused and changes nothing) nor renew. On
// SQLite and Postgres.
func TestOwnershipFencing(t *testing.T) { eachBackend(t, testOwnershipFencing) }

func testOwnershipFencing(t *testing.T, b backend) {
	a, src := openTestStoreOn(t, b)
	if err := a.Migrate("kernel", kernelMigrations); err != nil {
		t.Fatal(err)
	}
	nb, err := NewStore(b.dialect(src))
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	ctx := context.Background()
	t0 := time.UnixMilli(1_800_000_000_000)
	const ttl = 10 * time.Second
	write := func(s *Store, o Ownership, k int) error {
		return s.Tx(ctx, func(tx *Tx) error {
			if err := tx.Fence(o); err != nil {
				return err
			}
			_, err := tx.Exec(`INSERT INTO t(k,v) VALUES(?,?)`, k, o.Node)
			return err
		})
	}
	count := func() int {
		var n int
		if err := a.QueryRowContext(ctx, `SELECT count(*) FROM t`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	oa, err := a.Acquire(ctx, "proc/p1", "a", t0, ttl)
	if err != nil || oa.Epoch != 1 || oa.Node != "a" {
		t.Fatalf("a acquires: %+v, %v", oa, err)
	}
	if _, err := nb.Acquire(ctx, "proc/p1", "b", t0.Add(time.Second), ttl); !errors.Is(err, ErrLeased) {
		t.Fatalf("b acquires a live lease of a: %v", err)
	}
	if err := write(a, oa, 1); err != nil {
		t.Fatalf("a writes under its lease: %v", err)
	}
	if oa, err = a.Renew(ctx, oa, t0.Add(5*time.Second), ttl); err != nil || oa.Epoch != 1 {
		t.Fatalf("a renews: %+v, %v", oa, err)
	}
	if again, err := a.Acquire(ctx, "proc/p1", "a", t0.Add(6*time.Second), ttl); err != nil || again.Epoch != 1 {
		t.Fatalf("a acquires what it holds: %+v, %v", again, err)
	}

	// a pauses past its lease; b takes over.
	ob, err := nb.Acquire(ctx, "proc/p1", "b", t0.Add(17*time.Second), ttl)
	if err != nil || ob.Epoch != 2 || ob.Node != "b" {
		t.Fatalf("b takes the expired lease: %+v, %v", ob, err)
	}
	if err := write(a, oa, 2); !errors.Is(err, ErrFenced) {
		t.Fatalf("a writes after the takeover: %v, want ErrFenced", err)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d rows after a's fenced write, want 1", n)
	}
	if _, err := a.Renew(ctx, oa, t0.Add(18*time.Second), ttl); !errors.Is(err, ErrFenced) {
		t.Fatalf("a renews after the takeover: %v, want ErrFenced", err)
	}
	if err := a.Release(ctx, oa); err != nil {
		t.Fatal(err)
	}
	if err := write(nb, ob, 3); err != nil {
		t.Fatalf("b writes under its lease (a's release of an old epoch ends nothing): %v", err)
	}
	ls, err := a.Leases(ctx, "proc/")
	if err != nil || len(ls) != 1 || ls[0].Node != "b" || ls[0].Epoch != 2 {
		t.Fatalf("leases: %+v, %v", ls, err)
	}
	if ls, _ := a.Leases(ctx, "dev/"); len(ls) != 0 {
		t.Fatalf("leases of dev/: %+v", ls)
	}
}

// TestOwnershipFenceRace: a node writes under its lease as fast as it can
// while another takes the lease over. No write of the first node commits
// after the takeover: the rows it wrote are, to the last, those the new
// holder sees in its first fenced transaction. On SQLite and Postgres.
func TestOwnershipFenceRace(t *testing.T) { eachBackend(t, testOwnershipFenceRace) }

func testOwnershipFenceRace(t *testing.T, b backend) {
	a, src := openTestStoreOn(t, b)
	if err := a.Migrate("kernel", kernelMigrations); err != nil {
		t.Fatal(err)
	}
	nb, err := NewStore(b.dialect(src))
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	ctx := context.Background()
	t0 := time.UnixMilli(1_800_000_000_000)
	oa, err := a.Acquire(ctx, "proc/p1", "a", t0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var written atomic.Int64
	stop := make(chan struct{})
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				err := a.Tx(ctx, func(tx *Tx) error {
					if err := tx.Fence(oa); err != nil {
						return err
					}
					_, err := tx.Exec(`INSERT INTO t(k,v) VALUES(?,'a')`, w*1_000_000+i)
					return err
				})
				switch {
				case err == nil:
					written.Add(1)
				case errors.Is(err, ErrFenced):
					return
				default:
					t.Error(err)
					return
				}
			}
		}()
	}
	for written.Load() < 50 {
		runtime.Gosched()
	}
	ob, err := nb.Acquire(ctx, "proc/p1", "b", t0.Add(2*time.Second), time.Minute)
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	var seen int
	err = nb.Tx(ctx, func(tx *Tx) error {
		if err := tx.Fence(ob); err != nil {
			return err
		}
		return tx.QueryRow(`SELECT count(*) FROM t WHERE v='a'`).Scan(&seen)
	})
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait() // every writer ends with ErrFenced
	close(stop)
	var final int
	if err := a.QueryRowContext(ctx, `SELECT count(*) FROM t WHERE v='a'`).Scan(&final); err != nil {
		t.Fatal(err)
	}
	if final != seen || int64(final) != written.Load() {
		t.Fatalf("the new holder saw %d rows of the old one; %d are there, %d acknowledged", seen, final, written.Load())
	}
}
