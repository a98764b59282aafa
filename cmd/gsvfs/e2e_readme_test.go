package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeExample returns the README's example: the first fenced block after
// the sentence that promises it runs in order as written.
func readmeExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "runs in order as written")
	if i < 0 {
		t.Fatal("README.md: no example that runs in order as written")
	}
	s = s[i:]
	start := strings.Index(s, "```\n")
	if start < 0 {
		t.Fatal("README.md: the example has no code block")
	}
	s = s[start+4:]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatal("README.md: the example's code block does not end")
	}
	return s[:end]
}

// gsvPath matches the mount point /gsv at the start of a path.
var gsvPath = regexp.MustCompile(`(^|[^\w/.-])/gsv/`)

// TestREADMEExample runs the README's example block with bash -e, as a
// user would paste it, against a fresh mount (the block's /gsv is the
// test's mount point, its $PWD/bin the built binaries), with USER unset
// as in a container or after sudo -i: the example names its user itself.
func TestREADMEExample(t *testing.T) {
	requireFUSE(t)
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	defer d.stop()
	script := gsvPath.ReplaceAllString(readmeExample(t), "${1}"+d.mnt+"/")
	if err := os.Symlink(binDir, filepath.Join(d.work, "bin")); err != nil {
		t.Fatal(err)
	}
	r := runCmd(d.work, []string{"GSV_ADDR=unix!" + d.sock, raceEnv}, strings.NewReader(script), "bash", "-e", "-u", "-x")
	if r.err != nil {
		t.Fatalf("the README example failed: %v\n%s", r.err, r)
	}
	for _, want := range []string{
		"root:x:0:0:",       // /etc/passwd
		`"username":"root"`, // the call file's answer
		"unknown verb",      // the err view
		"alice uid=",        // gsv user add
		"proc.run.started",  // the events the watcher saw
		"inbox",             // the schedule from the crontab line
	} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("the README example's output lacks %q:\n%s", want, r)
		}
	}
}
