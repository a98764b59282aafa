package repocheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	benchFunc = regexp.MustCompile(`(?m)^func (Benchmark\w*)\(`)
	fuzzFunc  = regexp.MustCompile(`(?m)^func (Fuzz\w*)\(`)
	fuzzCall  = regexp.MustCompile(`\$\(call fuzz1,(Fuzz\w*),(\./[\w./]*)\)`)
	benchPkgs = regexp.MustCompile(`(?m)^BENCH_PKGS\s*:=\s*(.*)$`)
)

// TestMakeRunsEveryBenchAndFuzz checks that make bench runs every
// package with a benchmark and make fuzz every fuzz target, in its
// package: a benchmark or fuzz target the Makefile misses never runs.
func TestMakeRunsEveryBenchAndFuzz(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	bp := benchPkgs.FindSubmatch(mk)
	if bp == nil {
		t.Fatal("Makefile: no BENCH_PKGS")
	}
	inBench := map[string]bool{}
	for _, p := range strings.Fields(string(bp[1])) {
		inBench[p] = true
	}
	inFuzz := map[string]bool{}
	for _, m := range fuzzCall.FindAllSubmatch(mk, -1) {
		inFuzz[string(m[1])+" "+string(m[2])] = true
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".") && path != root) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := "./" + filepath.ToSlash(rel)
		if b := benchFunc.FindSubmatch(src); b != nil && !inBench[pkg] {
			t.Errorf("%s has %s; BENCH_PKGS does not list %s", path, b[1], pkg)
		}
		for _, f := range fuzzFunc.FindAllSubmatch(src, -1) {
			if !inFuzz[string(f[1])+" "+pkg] {
				t.Errorf("%s: %s is not in make fuzz as $(call fuzz1,%s,%s)", path, f[1], f[1], pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
