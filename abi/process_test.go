package abi

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestNarrowCap(t *testing.T) {
	wide := &ProcessCap{Networks: []string{NetworkNone, NetworkFull}, Mounts: []CapMount{{Prefix: "/", Mode: MountRW}}}
	ci := &ProcessCap{Networks: []string{NetworkNone}, Mounts: []CapMount{{Prefix: "~/ci", Mode: MountRW}}}
	for _, c := range []struct {
		name string
		a, b *ProcessCap
		want *ProcessCap
	}{
		{"nil narrows nothing", nil, nil, nil},
		{"nil and a cap", nil, ci, ci},
		{"a cap and nil", ci, nil, ci},
		{"the wide and a token's", wide, ci, ci},
		{"a token's and the wide", ci, wide, ci},
		{"a subtree of the other's home", ci,
			&ProcessCap{Networks: []string{NetworkNone, NetworkFull}, Mounts: []CapMount{{Prefix: "~", Mode: MountRW}}}, ci},
		{"the weaker mode", &ProcessCap{Networks: []string{NetworkFull}, Mounts: []CapMount{{Prefix: "~", Mode: MountRW}}},
			&ProcessCap{Networks: []string{NetworkFull}, Mounts: []CapMount{{Prefix: "~/ci", Mode: MountRO}}},
			&ProcessCap{Networks: []string{NetworkFull}, Mounts: []CapMount{{Prefix: "~/ci", Mode: MountRO}}}},
		{"disjoint mounts and networks", ci,
			&ProcessCap{Networks: []string{NetworkFull}, Mounts: []CapMount{{Prefix: "/workspaces", Mode: MountRW}}},
			&ProcessCap{Networks: []string{}, Mounts: []CapMount{}}},
		{"a home is not a namespace path", &ProcessCap{Mounts: []CapMount{{Prefix: "~", Mode: MountRW}}},
			&ProcessCap{Mounts: []CapMount{{Prefix: "/home/alice/ci", Mode: MountRW}}},
			&ProcessCap{Networks: []string{}, Mounts: []CapMount{}}},
		{"host paths only under host paths", &ProcessCap{Mounts: []CapMount{{Prefix: "/", Mode: MountRW}, {Prefix: "host:/srv", Mode: MountRW}}},
			&ProcessCap{Mounts: []CapMount{{Prefix: "host:/", Mode: MountRO}, {Prefix: "/srv", Mode: MountRW}}},
			&ProcessCap{Networks: []string{}, Mounts: []CapMount{{Prefix: "host:/srv", Mode: MountRO}, {Prefix: "/srv", Mode: MountRW}}}},
		{"the smaller ceilings", &ProcessCap{MaxSessions: 4, MaxTimeoutNs: 10, MaxProcesses: 0, MaxTTLNs: 7},
			&ProcessCap{MaxSessions: 2, MaxTimeoutNs: 0, MaxProcesses: 9, MaxTTLNs: 8},
			&ProcessCap{Networks: []string{}, Mounts: []CapMount{}, MaxSessions: 2, MaxTimeoutNs: 10, MaxProcesses: 9, MaxTTLNs: 7}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := NarrowCap(c.a, c.b)
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("NarrowCap(%+v, %+v) = %+v, want %+v", c.a, c.b, got, c.want)
			}
			if got != nil && (got == c.a || got == c.b) {
				t.Fatal("the result is one of the arguments")
			}
		})
	}
}

func TestCapAllows(t *testing.T) {
	pc := ProcessCap{Mounts: []CapMount{{Prefix: "~/ci", Mode: MountRW}, {Prefix: "/workspaces/", Mode: MountRO},
		{Prefix: "host:/srv", Mode: MountRW}}}
	for _, c := range []struct{ prefix, want string }{
		{"~/ci", MountRW}, {"~/ci/x", MountRW}, {"~/cix", ""}, {"~", ""}, {"/", ""},
		{"/workspaces", MountRO}, {"/workspaces/w1", MountRO}, {"/home/alice/ci", ""},
		{"host:/srv/a", MountRW}, {"/srv", ""}, {"host:/", ""},
	} {
		if got := pc.Allows(c.prefix); got != c.want {
			t.Errorf("Allows(%q) = %q, want %q", c.prefix, got, c.want)
		}
	}
	if got := (ProcessCap{Mounts: []CapMount{{Prefix: "/", Mode: MountRW}}}).Allows("~/x"); got != MountRW {
		t.Errorf("/ covers the home: %q", got)
	}
}

// TestNarrowCapOnlyNarrows checks, over random capabilities, that the
// narrowing of two allows nothing that either does not: every network,
// every path at every mode, every ceiling; and that narrowing by what
// one already allows changes nothing it allows.
func TestNarrowCapOnlyNarrows(t *testing.T) {
	prefixes := []string{"/", "~", "~/ci", "~/ci/a", "/home", "/home/alice", "/home/alice/ci", "/workspaces", "/workspaces/w",
		"host:/", "host:/srv", "host:/srv/x", "/srv"}
	probes := append(slices.Clone(prefixes), "~/cia", "~/ci/a/b", "/home/bob", "/workspaces/w/z", "host:/etc", "/var/sessions")
	networks := []string{NetworkNone, NetworkFull}
	rng := rand.New(rand.NewPCG(1, 2))
	random := func() *ProcessCap {
		if rng.IntN(6) == 0 {
			return nil
		}
		pc := &ProcessCap{}
		for _, n := range networks {
			if rng.IntN(2) == 0 {
				pc.Networks = append(pc.Networks, n)
			}
		}
		for range rng.IntN(4) {
			mode := MountRO
			if rng.IntN(2) == 0 {
				mode = MountRW
			}
			pc.Mounts = append(pc.Mounts, CapMount{Prefix: prefixes[rng.IntN(len(prefixes))], Mode: mode})
		}
		pc.MaxSessions, pc.MaxTimeoutNs = rng.IntN(3), int64(rng.IntN(3))
		return pc
	}
	rank := map[string]int{"": 0, MountRO: 1, MountRW: 2}
	// allows is what a capability allows at p, nil being everything.
	allows := func(pc *ProcessCap, p string) int {
		if pc == nil {
			return 2
		}
		return rank[pc.Allows(p)]
	}
	hasNet := func(pc *ProcessCap, n string) bool { return pc == nil || slices.Contains(pc.Networks, n) }
	ceiling := func(pc *ProcessCap, f func(*ProcessCap) int64) int64 {
		if pc == nil {
			return 0
		}
		return f(pc)
	}
	// within says whether ceiling x (0: none) is no larger than y.
	within := func(x, y int64) bool { return y == 0 || (x != 0 && x <= y) }
	for i := range 20000 {
		a, b := random(), random()
		n := NarrowCap(a, b)
		for _, p := range probes {
			if got := allows(n, p); got > allows(a, p) || got > allows(b, p) {
				t.Fatalf("case %d: NarrowCap(%+v, %+v) = %+v allows %s more than one of them", i, a, b, n, p)
			}
		}
		for _, net := range networks {
			if hasNet(n, net) && !(hasNet(a, net) && hasNet(b, net)) {
				t.Fatalf("case %d: NarrowCap(%+v, %+v) = %+v allows network %s", i, a, b, n, net)
			}
		}
		for _, f := range []func(*ProcessCap) int64{
			func(pc *ProcessCap) int64 { return int64(pc.MaxSessions) },
			func(pc *ProcessCap) int64 { return pc.MaxTimeoutNs },
		} {
			if c := ceiling(n, f); !within(c, ceiling(a, f)) || !within(c, ceiling(b, f)) {
				t.Fatalf("case %d: NarrowCap(%+v, %+v) = %+v: a ceiling grew", i, a, b, n)
			}
		}
		for _, side := range []*ProcessCap{a, b} {
			if side != nil && !CapWithin(*n, *side) {
				t.Fatalf("case %d: NarrowCap(%+v, %+v) = %+v is not within %+v", i, a, b, n, side)
			}
		}
		// Narrowing a capability by itself keeps what it allows.
		if self := NarrowCap(a, a); a != nil {
			for _, p := range probes {
				if allows(self, p) != allows(a, p) {
					t.Fatalf("case %d: NarrowCap(a, a) with a = %+v changes %s", i, a, p)
				}
			}
		}
	}
}

func TestCapWithin(t *testing.T) {
	wide := ProcessCap{Networks: []string{NetworkNone, NetworkFull}, Mounts: []CapMount{{Prefix: "/", Mode: MountRW}}}
	ci := ProcessCap{Networks: []string{NetworkNone}, Mounts: []CapMount{{Prefix: "~/ci", Mode: MountRW}}}
	for _, c := range []struct {
		name string
		a, b ProcessCap
		want bool
	}{
		{"itself", ci, ci, true},
		{"the narrow in the wide", ci, wide, true},
		{"the wide in the narrow", wide, ci, false},
		{"a network more", ProcessCap{Networks: []string{NetworkFull}}, ci, false},
		{"a stronger mode", ProcessCap{Mounts: []CapMount{{Prefix: "~/ci/x", Mode: MountRW}}},
			ProcessCap{Mounts: []CapMount{{Prefix: "~/ci", Mode: MountRO}}}, false},
		{"a weaker mode", ProcessCap{Mounts: []CapMount{{Prefix: "~/ci/x", Mode: MountRO}}}, ci, true},
		{"no ceiling where one binds", ci, ProcessCap{Networks: []string{NetworkNone}, Mounts: ci.Mounts, MaxTimeoutNs: 5}, false},
		{"a smaller ceiling", ProcessCap{MaxTimeoutNs: 3}, ProcessCap{MaxTimeoutNs: 5}, true},
		{"a larger ceiling", ProcessCap{MaxProcesses: 9}, ProcessCap{MaxProcesses: 5}, false},
	} {
		if got := CapWithin(c.a, c.b); got != c.want {
			t.Errorf("%s: CapWithin(%+v, %+v) = %v, want %v", c.name, c.a, c.b, got, c.want)
		}
	}
	// What NarrowCap gives is within both of its sides.
	for _, pair := range [][2]ProcessCap{{wide, ci}, {ci, wide}, {ci, ProcessCap{Networks: []string{NetworkNone}, Mounts: []CapMount{{Prefix: "~", Mode: MountRO}}}}} {
		n := NarrowCap(&pair[0], &pair[1])
		if !CapWithin(*n, pair[0]) || !CapWithin(*n, pair[1]) {
			t.Errorf("NarrowCap(%+v, %+v) = %+v is not within both", pair[0], pair[1], *n)
		}
	}
}
