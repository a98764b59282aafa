package sched

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"testing"

	"gsvfs.dev/gsvfs/internal/pgtest"
	"gsvfs.dev/gsvfs/kernel"
)

// TestClaimsExactlyOnce: 10,000 occurrences due at one minute, claimed by
// three nodes (stores on one database) at once, each in dispatch-sized
// chunks in its own order: every occurrence is claimed by exactly one
// node, and claiming again claims nothing. On SQLite and Postgres.
func TestClaimsExactlyOnce(t *testing.T) {
	for _, b := range []struct {
		name    string
		source  func(t *testing.T) string
		dialect func(string) kernel.Dialect
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "gsv.db") }, kernel.SQLite},
		{"postgres", func(t *testing.T) string { return pgtest.New(t) }, kernel.Postgres},
	} {
		t.Run(b.name, func(t *testing.T) {
			src := b.source(t)
			nodes := make([]*kernel.Store, 3)
			for i := range nodes {
				st, err := kernel.NewStore(b.dialect(src)) // a dialect is one store's
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				if err := st.Migrate("sched", migrations(st.Dialect())); err != nil {
					t.Fatal(err)
				}
				nodes[i] = st
			}
			const n, minute = 10_000, int64(1_800_000_000_000)
			occ := make([]claimKey, n)
			for i := range occ {
				occ[i] = claimKey{id: fmt.Sprintf("s%05d", i), at: minute}
			}
			ctx := context.Background()
			got := make([][]claimKey, len(nodes))
			var wg sync.WaitGroup
			errs := make([]error, len(nodes))
			for i, st := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					mine := append([]claimKey(nil), occ...)
					rand.Shuffle(len(mine), func(a, b int) { mine[a], mine[b] = mine[b], mine[a] })
					for len(mine) > 0 {
						chunk := mine[:min(len(mine), dispatchChunk)]
						mine = mine[len(chunk):]
						c, err := claim(ctx, st, fmt.Sprint("node", i), chunk, minute)
						if err != nil {
							errs[i] = err
							return
						}
						got[i] = append(got[i], c...)
					}
				}()
			}
			wg.Wait()
			seen := map[claimKey]int{}
			for i := range nodes {
				if errs[i] != nil {
					t.Fatalf("node %d: %v", i, errs[i])
				}
				for _, o := range got[i] {
					seen[o]++
				}
			}
			if len(seen) != n {
				t.Errorf("%d occurrences claimed, want %d", len(seen), n)
			}
			for o, c := range seen {
				if c != 1 {
					t.Errorf("%v claimed %d times", o, c)
				}
			}
			if again, err := claim(ctx, nodes[0], "node0", occ[:100], minute); err != nil || len(again) != 0 {
				t.Errorf("claiming again: %d claimed, %v", len(again), err)
			}
			if err := pruneClaims(ctx, nodes[1], minute+1); err != nil {
				t.Fatal(err)
			}
			if again, err := claim(ctx, nodes[2], "node2", occ[:3], minute+60_000); err != nil || len(again) != 3 {
				t.Errorf("the next minute's occurrences: %d claimed, %v", len(again), err)
			}
		})
	}
}
