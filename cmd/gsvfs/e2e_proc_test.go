package main_test

// Agent processes through the real daemon: /proc driven by shell commands
// on the FUSE mount, and the same core flow over 9P, with the scripted
// model provider configured through /sys/config.

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

// procScript is the scripted model of both flows: one JSON line per model
// call, in the order the flows make them (expectUser catches a call made
// out of order).
const procScript = `
{"text":"Let me read it.","tools":[{"name":"Read","args":{"path":"~/notes.txt"}}],"expectUser":"notes.txt"}
{"text":"Your notes say: buy milk."}
{"text":"b1","expectUser":"build one"}
{"text":"b2","expectUser":"build two"}
{"text":"b3","expectUser":"build three"}
{"tools":[{"name":"Shell","args":{"command":"echo hil-ok"}}],"expectUser":"shell please"}
{"tools":[{"name":"Shell","args":{"command":"echo second-shell"}}]}
{"text":"Both commands ran."}
`

// epMsg is one line of a history view.
type epMsg struct {
	ID        int64           `json:"id"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	Timestamp int64           `json:"timestamp"`
}

func (m epMsg) text() string {
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return s
	}
	var c struct {
		Text   string `json:"text"`
		Output string `json:"output"`
	}
	json.Unmarshal(m.Content, &c)
	return c.Text + c.Output
}

func epHistory(t *testing.T, s string) []epMsg {
	t.Helper()
	var out []epMsg
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var m epMsg
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("history line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func epRoles(ms []epMsg) string {
	var s []string
	for _, m := range ms {
		s = append(s, m.Role)
	}
	return strings.Join(s, ",")
}

// epWaitIdle polls a process's status view (read with read) until it has
// no run and no queue.
func epWaitIdle(t *testing.T, read func(p string) (string, error), base string) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		st, err := read(base + "/status")
		if err == nil && strings.Contains(st, "state: idle\n") && strings.Contains(st, "queued: 0\n") && strings.Contains(st, "run: -\n") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not idle: %q (%v)", base, st, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// epWaitHil polls a process's hil view until it shows a request.
func epWaitHil(t *testing.T, read func(p string) (string, error), base string) (id, tool string) {
	t.Helper()
	deadline := time.Now().Add(liveness)
	for {
		s, err := read(base + "/hil")
		if err == nil && strings.TrimSpace(s) != "" {
			var h struct {
				RequestID string `json:"requestId"`
				ToolName  string `json:"toolName"`
			}
			if err := json.Unmarshal([]byte(s), &h); err != nil || h.RequestID == "" {
				t.Fatalf("hil view %q: %v", s, err)
			}
			return h.RequestID, h.ToolName
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HIL request in %s/hil: %q (%v)", base, s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// epRunEvents reads event lines until proc.run.finished and returns them.
func epRunEvents(t *testing.T, lines <-chan string) []sigFrame {
	t.Helper()
	var out []sigFrame
	for {
		f := parseSig(t, nextLine(t, lines, 10*time.Second))
		out = append(out, f)
		if f.Signal == "proc.run.finished" {
			return out
		}
	}
}

// epCheckRunEvents checks the events of the first run of the flows: a
// Read tool call, then the answer.
func epCheckRunEvents(t *testing.T, evs []sigFrame, pid string) {
	t.Helper()
	var order []string
	for _, e := range evs {
		if e.Payload["pid"] != pid {
			t.Fatalf("event of another process: %+v", e)
		}
		if e.Signal == "proc.run.usage" {
			continue // a model call's usage, beside its output (docs/operations.md)
		}
		if len(order) == 0 || order[len(order)-1] != e.Signal {
			order = append(order, e.Signal)
		}
	}
	want := []string{"proc.run.started", "proc.run.stream", "proc.run.output", "proc.run.tool.started", "proc.run.tool.finished",
		"proc.run.stream", "proc.run.output", "proc.run.finished"}
	if !slices.Equal(order, want) {
		t.Fatalf("run events %v, want %v", order, want)
	}
	if fin := evs[len(evs)-1]; fin.Payload["status"] != "done" {
		t.Fatalf("run finished %+v", fin.Payload)
	}
	for _, e := range evs {
		if e.Signal == "proc.run.tool.started" && (e.Payload["toolName"] != "Read" || e.Payload["syscall"] != "fs.read") {
			t.Fatalf("tool event %+v", e.Payload)
		}
	}
}

// epWriteScript writes the scripted model's script into root's home (a
// script is a file of the namespace, read as the process's owner) and
// returns its namespace path.
func epWriteScript(t *testing.T, d *daemon) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/script.jsonl"), []byte(procScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return "/home/root/script.jsonl"
}

func TestE2EProcFUSE(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{mount: true})
	script := epWriteScript(t, d)
	M := d.mnt
	run := func(sh string, args ...string) string {
		t.Helper()
		r := d.sh(sh, args...)
		if r.err != nil || r.code != 0 {
			t.Fatalf("%s: %v", sh, r)
		}
		return r.stdout
	}
	// fail runs sh, which must fail with errno.
	fail := func(errno syscall.Errno, sh string, args ...string) {
		t.Helper()
		r := d.sh(sh, args...)
		if r.code == 0 || errnoOf(r.stderr) != errno {
			t.Fatalf("%s: %v, want %v", sh, r, errno)
		}
	}
	read := func(p string) (string, error) {
		r := d.sh(`cat "$1"`, p)
		if r.code != 0 {
			return r.stdout, &opError{op: "cat", path: p, msg: r.stderr}
		}
		return r.stdout, nil
	}

	run(`echo 'set config/ai/provider scripted' > "$1/sys/config/ctl" && echo "set config/ai/script $2" > "$1/sys/config/ctl"`, M, script)
	run(`echo 'buy milk' > "$1/home/root/notes.txt"`, M)
	pid := strings.TrimSpace(run(`exec 3<>"$1/proc/clone"; echo 'spawn task label=researcher' >&3; read pid <&3; echo "$pid"`, M))
	if pid == "" || strings.ContainsAny(pid, " /") {
		t.Fatalf("clone gave pid %q", pid)
	}
	P := M + "/proc/" + pid
	if st := run(`cat "$1/status"`, P); !strings.Contains(st, "pid: "+pid+"\n") || !strings.Contains(st, "label: researcher\n") ||
		!strings.Contains(st, "profile: task\n") || !strings.Contains(st, "user: root\n") || !strings.Contains(st, "state: idle\n") {
		t.Fatalf("status:\n%s", st)
	}
	if ls := run(`ls "$1/proc"`, M); !strings.Contains(ls, pid+"\n") || !strings.Contains(ls, "init:0\n") {
		t.Fatalf("ls /proc:\n%s", ls)
	}

	// A message written to in starts a run; the events stream shows it.
	events := P + "/events"
	cat := exec.Command("cat", events)
	cat.Dir = d.work
	lines := catStream(t, cat)
	waitOpen(t, cat.Process.Pid, events)
	run(`echo 'What is in my notes.txt?' > "$1/conversations/default/in"`, P)
	epCheckRunEvents(t, epRunEvents(t, lines), pid)
	epWaitIdle(t, read, P)
	hist := epHistory(t, run(`cat "$1/conversations/default/history"`, P))
	if epRoles(hist) != "user,assistant,toolResult,assistant" || hist[0].text() != "What is in my notes.txt?" ||
		!strings.Contains(hist[2].text(), "buy milk") || hist[3].text() != "Your notes say: buy milk." {
		t.Fatalf("history %+v", hist)
	}
	if tr := run(`cat "$1/conversations/default/transcript"`, P); !strings.Contains(tr, "Your notes say: buy milk.") ||
		!strings.Contains(tr, "-> Read") || !strings.Contains(tr, "buy milk") {
		t.Fatalf("transcript:\n%s", tr)
	}

	// A second conversation; messages queue and run in order.
	run(`echo 'open build title=Build' > "$1/conversations/ctl"`, P)
	var info struct {
		ID         string `json:"id"`
		Title      string `json:"title"`
		Generation int    `json:"generation"`
		Status     string `json:"status"`
	}
	if err := json.Unmarshal([]byte(run(`cat "$1/conversations/build/info"`, P)), &info); err != nil || info.Title != "Build" || info.Generation != 1 || info.Status != "open" {
		t.Fatalf("info %+v (%v)", info, err)
	}
	if ls := strings.Fields(run(`ls "$1/conversations"`, P)); !slices.Equal(ls, []string{"build", "ctl", "default", "err"}) {
		t.Fatalf("ls conversations: %v", ls)
	}
	run(`echo 'send build one' > "$1/conversations/build/ctl"; echo 'build two' > "$1/conversations/build/in"; printf 'build three' > "$1/conversations/build/in"`, P)
	epWaitIdle(t, read, P)
	build := epHistory(t, run(`cat "$1/conversations/build/history"`, P))
	var texts []string
	for _, m := range build {
		texts = append(texts, m.text())
	}
	if want := []string{"build one", "b1", "build two", "b2", "build three", "b3"}; !slices.Equal(texts, want) {
		t.Fatalf("build: %q", texts)
	}

	// Compact, read the segment, fork it back.
	run(`echo 'compact keep=2 summary=done' > "$1/conversations/build/ctl"`, P)
	seg := strings.TrimSpace(run(`ls "$1/conversations/build/segments"`, P))
	if !strings.HasPrefix(seg, "seg_") || strings.Contains(seg, "\n") {
		t.Fatalf("segments: %q", seg)
	}
	var meta struct {
		ID          string `json:"id"`
		Kind        string `json:"kind"`
		Messages    int    `json:"messages"`
		ArchivePath string `json:"archivePath"`
	}
	if err := json.Unmarshal([]byte(run(`cat "$1"/conversations/build/segments/*/meta`, P)), &meta); err != nil || meta.ID != seg || meta.Kind != "compaction" || meta.Messages != 4 {
		t.Fatalf("meta %+v (%v)", meta, err)
	}
	if n := strings.TrimSpace(run(`cat "$1"/conversations/build/segments/*/messages | wc -l`, P)); n != "4" {
		t.Fatalf("segment messages: %s lines", n)
	}
	if n := strings.TrimSpace(run(`zcat "$1$2" | wc -l`, M, meta.ArchivePath)); n != "4" {
		t.Fatalf("archive %s: %s lines", meta.ArchivePath, n)
	}
	live := epHistory(t, run(`cat "$1/conversations/build/history"`, P))
	if epRoles(live) != "system,user,assistant" || !strings.HasPrefix(live[0].text(), "[Process Event]: Compacted 4 messages") || !strings.HasSuffix(live[0].text(), "done") {
		t.Fatalf("after compact: %+v", live)
	}
	run(`echo "fork segment=$2 as=replay" > "$1/conversations/build/ctl"`, P, seg)
	replay := epHistory(t, run(`cat "$1/conversations/replay/history"`, P))
	if len(replay) != len(build) {
		t.Fatalf("replay has %d messages, want %d", len(replay), len(build))
	}
	for i := range replay {
		if replay[i].Role != build[i].Role || string(replay[i].Content) != string(build[i].Content) {
			t.Fatalf("replay[%d] = %+v, want %+v", i, replay[i], build[i])
		}
	}
	fail(syscall.EBUSY, `env echo "fork segment=$2 as=replay" > "$1/conversations/build/ctl"`, P, seg)
	fail(syscall.EINVAL, `env echo compact > "$1/conversations/build/ctl"`, P)
	if e := run(`cat "$1/conversations/build/err"`, P); !strings.Contains(e, "selector") {
		t.Fatalf("err after a bad compact: %q", e)
	}
	fail(syscall.EINVAL, `env echo frobnicate > "$1/ctl"`, P)

	// HIL: the Shell call waits; approve with remember; the second Shell
	// call runs without asking.
	run(`echo 'shell please' > "$1/conversations/default/in"`, P)
	reqID, tool := epWaitHil(t, read, P)
	if tool != "Shell" {
		t.Fatalf("HIL tool %q", tool)
	}
	if st := run(`cat "$1/status"`, P); !strings.Contains(st, "state: waiting\n") {
		t.Fatalf("status while waiting:\n%s", st)
	}
	fail(syscall.ENOENT, `env echo 'hil approve hil_00000000 remember' > "$1/ctl"`, P)
	run(`echo "hil approve $2 remember" > "$1/ctl"`, P, reqID)
	epWaitIdle(t, read, P)
	def := epHistory(t, run(`cat "$1/conversations/default/history"`, P))
	if got := epRoles(def[4:]); got != "user,assistant,toolResult,assistant,toolResult,assistant" {
		t.Fatalf("HIL history %s", got)
	}
	if !strings.Contains(def[6].text(), "hil-ok") || !strings.Contains(def[8].text(), "second-shell") || def[9].text() != "Both commands ran." {
		t.Fatalf("HIL results %+v", def[4:])
	}
	if h := run(`cat "$1/hil"`, P); h != "" {
		t.Fatalf("hil after the answer: %q", h)
	}

	// Reading the whole of /proc (but the event streams) starts no model
	// work.
	sys := exec.Command("cat", d.p("/sys/events"))
	sys.Dir = d.work
	sysLines := catStream(t, sys)
	waitOpen(t, sys.Process.Pid, d.p("/sys/events"))
	counts := func() []string {
		return strings.Fields(run(`for c in default build replay; do wc -l < "$1/conversations/$c/history"; done`, P))
	}
	before := counts()
	r := d.sh(`find "$1/proc" -type f ! -name events -exec cat {} + > /dev/null 2>&1; find "$1/proc" -type f ! -name events | wc -l`, M)
	if n, _ := strconv.Atoi(strings.TrimSpace(r.stdout)); n < 20 {
		t.Fatalf("the crawl found %d files: %v", n, r)
	}
	time.Sleep(300 * time.Millisecond)
drain:
	for {
		select {
		case l := <-sysLines:
			if f := parseSig(t, l); strings.HasPrefix(f.Signal, "proc.") {
				t.Fatalf("reading /proc made a signal: %s", l)
			}
		default:
			break drain
		}
	}
	if after := counts(); !slices.Equal(before, after) {
		t.Fatalf("history lengths changed by reading: %v -> %v", before, after)
	}

	// Kill: one archive directory, one file per non-empty conversation.
	run(`echo kill > "$1/ctl"`, P)
	var archive string
	for _, e := range strings.Fields(run(`ls "$1/var/sessions/root/$2/"`, M, pid)) {
		switch {
		case e == "build": // the compaction's
		case strings.Contains(e, "Z-"):
			if archive != "" {
				t.Fatalf("two archive dirs: %s %s", archive, e)
			}
			archive = e
		default:
			t.Fatalf("unexpected %s in /var/sessions/root/%s", e, pid)
		}
	}
	A := M + "/var/sessions/root/" + pid + "/" + archive
	if ls := strings.Fields(run(`ls "$1"`, A)); !slices.Equal(ls, []string{"build.gen-1.jsonl.gz", "default.gen-1.jsonl.gz", "replay.gen-1.jsonl.gz"}) {
		t.Fatalf("archive holds %v", ls)
	}
	for i, c := range []string{"default", "build", "replay"} {
		if n := strings.TrimSpace(run(`zcat "$1/$2.gen-1.jsonl.gz" | wc -l`, A, c)); n != before[i] {
			t.Fatalf("archive of %s: %s lines, want %s", c, n, before[i])
		}
	}
	if n := strings.TrimSpace(run(`wc -l < "$1/conversations/default/history"`, P)); n != "0" {
		t.Fatalf("history after kill: %s lines", n)
	}
	// The readers of the streams go before the mount does.
	for _, c := range []*exec.Cmd{cat, sys} {
		c.Process.Signal(syscall.SIGTERM)
		c.Wait()
	}
	d.stop()
}

func TestE2EProcNinep(t *testing.T) {
	d := startDaemon(t, newBase(t), daemonOpts{})
	script := epWriteScript(t, d)
	fsys := d.dial(t)
	ns := &ninepOps{fsys: fsys}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	readOK := func(p string) string {
		t.Helper()
		s, err := ns.ReadFile(p)
		must(err)
		return s
	}
	must(ns.Ctl("/sys/config/ctl", "set config/ai/provider scripted"))
	must(ns.Ctl("/sys/config/ctl", "set config/ai/script "+script))
	// Data-tree files are reached on the host here, not over 9P: a 9P
	// request on the data tree races with the daemon's shutdown (main
	// closes the kernel without waiting for ninep.Server.Serve to end its
	// connections), which the race detector reports at d.stop.
	must(os.WriteFile(filepath.Join(d.state, "fs/home/root/notes.txt"), []byte("buy milk\n"), 0o644))

	// clone: write a spawn line, read the pid back on the same fid.
	fid, err := fsys.Open("/proc/clone", plan9.ORDWR)
	must(err)
	_, err = fid.Write([]byte("spawn task label=ninep\n"))
	must(err)
	buf := make([]byte, 128)
	n, err := fid.Read(buf)
	must(err)
	fid.Close()
	pid := strings.TrimSpace(string(buf[:n]))
	P := "/proc/" + pid
	if st := readOK(P + "/status"); !strings.Contains(st, "label: ninep\n") {
		t.Fatalf("status %q", st)
	}

	// The events stream, on a connection of its own.
	evfs := d.dial(t)
	lines := ninepLines(t, evfs, P+"/events")
	must(ns.WriteFile(P+"/conversations/default/in", "What is in my notes.txt?"))
	epCheckRunEvents(t, epRunEvents(t, lines), pid)
	epWaitIdle(t, ns.ReadFile, P)
	hist := epHistory(t, readOK(P+"/conversations/default/history"))
	if epRoles(hist) != "user,assistant,toolResult,assistant" || !strings.Contains(hist[2].text(), "buy milk") {
		t.Fatalf("history %+v", hist)
	}

	must(ns.Ctl(P+"/conversations/ctl", "open build title=Build"))
	must(ns.Ctl(P+"/conversations/build/ctl", "send build one"))
	must(ns.WriteFile(P+"/conversations/build/in", "build two"))
	must(ns.WriteFile(P+"/conversations/build/in", "build three"))
	epWaitIdle(t, ns.ReadFile, P)
	build := epHistory(t, readOK(P+"/conversations/build/history"))
	if len(build) != 6 || build[5].text() != "b3" {
		t.Fatalf("build %+v", build)
	}
	must(ns.Ctl(P+"/conversations/build/ctl", "compact keep=2 summary=done"))
	segs, err := ns.List(P + "/conversations/build/segments")
	must(err)
	if len(segs) != 1 {
		t.Fatalf("segments %v", segs)
	}
	var seg string
	for s := range segs {
		seg = s
	}
	if m := readOK(P + "/conversations/build/segments/" + seg + "/meta"); !strings.Contains(m, `"messages": 4`) {
		t.Fatalf("meta %s", m)
	}
	if m := readOK(P + "/conversations/build/segments/" + seg + "/messages"); strings.Count(m, "\n") != 4 {
		t.Fatalf("segment messages %q", m)
	}
	must(ns.Ctl(P+"/conversations/build/ctl", "fork segment="+seg+" as=replay"))
	if r := epHistory(t, readOK(P+"/conversations/replay/history")); len(r) != 6 {
		t.Fatalf("replay %+v", r)
	}
	// A failed command's Rerror is the syscall's message.
	err = ns.Ctl(P+"/conversations/build/ctl", "fork segment="+seg+" as=replay")
	wantErr(t, ns, err, syscall.EBUSY, "already exists")

	must(ns.WriteFile(P+"/conversations/default/in", "shell please"))
	reqID, _ := epWaitHil(t, ns.ReadFile, P)
	must(ns.Ctl(P+"/ctl", "hil approve "+reqID+" remember"))
	epWaitIdle(t, ns.ReadFile, P)
	def := epHistory(t, readOK(P+"/conversations/default/history"))
	if len(def) != 10 || def[9].text() != "Both commands ran." {
		t.Fatalf("default %+v", def)
	}

	must(ns.Ctl(P+"/ctl", "kill"))
	sessions := filepath.Join(d.state, "fs/var/sessions/root", pid)
	ents, err := os.ReadDir(sessions)
	must(err)
	var archive string
	for _, e := range ents {
		if strings.Contains(e.Name(), "Z-") {
			archive = e.Name()
		}
	}
	files, err := os.ReadDir(filepath.Join(sessions, archive))
	must(err)
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
	}
	if !slices.Equal(names, []string{"build.gen-1.jsonl.gz", "default.gen-1.jsonl.gz", "replay.gen-1.jsonl.gz"}) {
		t.Fatalf("archive %s holds %v", archive, names)
	}
	if h := readOK(P + "/conversations/default/history"); h != "" {
		t.Fatalf("history after kill %q", h)
	}
	d.stop()
}

// ninepLines reads the stream file p over fsys in the background and
// returns its lines. The read ends when fsys closes (test cleanup).
func ninepLines(t *testing.T, fsys *client.Fsys, p string) <-chan string {
	t.Helper()
	fid, err := fsys.Open(p, plan9.OREAD)
	if err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		var pending string
		buf := make([]byte, 64<<10)
		for {
			n, err := fid.Read(buf)
			if err != nil || n == 0 {
				return
			}
			pending += string(buf[:n])
			for {
				i := strings.IndexByte(pending, '\n')
				if i < 0 {
					break
				}
				lines <- pending[:i]
				pending = pending[i+1:]
			}
		}
	}()
	return lines
}

// A daemon stopped mid-run resumes the run and its queue when it starts
// again; a pending approval survives the restart.
func TestE2EProcRestart(t *testing.T) {
	base := newBase(t)
	d := startDaemon(t, base, daemonOpts{})
	script := filepath.Join(d.state, "fs/home/root/script.jsonl")
	writeScript := func(s string) {
		t.Helper()
		if err := os.WriteFile(script, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeScript(`{"text":"too slow","delayMs":60000,"expectUser":"first"}
{"tools":[{"name":"Shell","args":{"command":"echo approved-after-restart"}}],"expectUser":"hil"}
`)
	ns := &ninepOps{fsys: d.dial(t)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ns.Ctl("/sys/config/ctl", "set config/ai/provider scripted"))
	must(ns.Ctl("/sys/config/ctl", "set config/ai/script ~/script.jsonl"))
	must(ns.Ctl("/proc/ctl", "spawn task label=slow"))
	must(ns.Ctl("/proc/ctl", "spawn task label=hil"))
	ps, err := ns.List("/proc")
	must(err)
	var slow, hil string
	for p := range ps {
		st, err := ns.ReadFile("/proc/" + p + "/status")
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(st, "label: slow\n"):
			slow = p
		case strings.Contains(st, "label: hil\n"):
			hil = p
		}
	}
	if slow == "" || hil == "" {
		t.Fatalf("spawned processes not found in %v", ps)
	}
	S, H := "/proc/"+slow, "/proc/"+hil
	must(ns.Ctl(S+"/ctl", "send first"))
	must(ns.Ctl(S+"/ctl", "send second"))
	must(ns.Ctl(S+"/ctl", "send third"))
	// Wait until the slow turn is under way, then ask for the approval.
	deadline := time.Now().Add(liveness)
	for {
		st, _ := ns.ReadFile(S + "/status")
		if strings.Contains(st, "queued: 2\n") && strings.Contains(st, "state: running\n") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status %q", st)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Another process's run waits for an approval.
	must(ns.Ctl(H+"/ctl", "send hil"))
	reqID, _ := epWaitHil(t, ns.ReadFile, H)
	d.stop()

	// The next daemon's model.
	writeScript(`{"text":"resumed first","expectUser":"first"}
{"text":"reply second","expectUser":"second"}
{"text":"reply third","expectUser":"third"}
{"text":"after the approval"}
`)
	d = startDaemon(t, base, daemonOpts{})
	ns = &ninepOps{fsys: d.dial(t)}
	epWaitIdle(t, ns.ReadFile, S)
	hist, err := ns.ReadFile(S + "/conversations/default/history")
	must(err)
	var texts []string
	for _, m := range epHistory(t, hist) {
		texts = append(texts, m.text())
	}
	if want := []string{"first", "resumed first", "second", "reply second", "third", "reply third"}; !slices.Equal(texts, want) {
		t.Fatalf("after the restart: %q", texts)
	}
	// The approval is still pending, and answering it resumes the run.
	if st, _ := ns.ReadFile(H + "/status"); !strings.Contains(st, "state: waiting\n") {
		t.Fatalf("hil process after the restart: %q", st)
	}
	if id, _ := epWaitHil(t, ns.ReadFile, H); id != reqID {
		t.Fatalf("pending request %s after the restart, want %s", id, reqID)
	}
	must(ns.Ctl(H+"/ctl", "hil approve "+reqID))
	epWaitIdle(t, ns.ReadFile, H)
	hist, err = ns.ReadFile(H + "/conversations/default/history")
	must(err)
	hm := epHistory(t, hist)
	if epRoles(hm) != "user,assistant,toolResult,assistant" || !strings.Contains(hm[2].text(), "approved-after-restart") || hm[3].text() != "after the approval" {
		t.Fatalf("hil process after the restart: %+v", hm)
	}
	d.stop()
}
