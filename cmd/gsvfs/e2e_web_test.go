package main_test

// The web console in a real browser: headless Chromium from Debian,
// driven by chromedp, against the daemon's --http listener. It signs in
// with a gsv login-link, spawns a process, sends a message, sees the
// scripted model's reply stream in, approves the tool call the model
// asks for and sees the run finish.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

const webScript = `{"text":"streamed reply before the tool ","tools":[{"name":"Shell","args":{"command":"echo from-the-web > web-approved.txt"}}],"expectUser":"hello from the browser"}
{"text":"all done after approval"}
`

const webCheckpointScript = `{"text":"reading ","tools":[{"name":"Read","args":{"path":"/etc/passwd"}}],"expectUser":"check the passwd file"}
{"text":"refocused on groups","expectUser":"focus on the groups"}
`

const webDenyScript = `{"tools":[{"name":"Shell","args":{"command":"echo no > web-denied.txt"}}],"expectUser":"try something risky"}
{"text":"denied, as you wish"}
`

// browser starts headless Chromium (as root it needs --no-sandbox) and
// returns a chromedp context whose browser runs; steps run on it are
// bounded by step.
func browser(t testing.TB) context.Context {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("needs chromium (make deps installs Debian's)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1000, 800),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(acancel)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	// The first run starts the browser, for the context's life: no
	// timeout on it (chromedp.Run's rule).
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// step runs actions on the browser of ctx, bounded by liveness.
func step(t testing.TB, ctx context.Context, d *daemon, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 2*liveness)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		var body string
		if b, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText")); err == nil {
			body = b
		}
		t.Fatalf("browser: %v\npage:\n%s\ndaemon:\n%s", err, body, d.stderr.String())
	}
}

// text returns the text of the element sel.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 2*liveness)
	defer cancel()
	s, err := chromedp.Run(sctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// screenshot saves the page as name.png in $GSV_WEB_SHOTS (docs/web's
// screenshots), else in the test's temp dir.
func screenshot(t *testing.T, name string) chromedp.Action[chromedp.Void] {
	dir := os.Getenv("GSV_WEB_SHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		buf, err := chromedp.CaptureScreenshot()(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name+".png"), buf, 0o644)
	})
}

func TestE2EWebConsole(t *testing.T) {
	port := freePort(t)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", freePort(t))
	d := startDaemon(t, newBase(t), daemonOpts{logLevel: "warn", listen: listen, args: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/web.jsonl"), []byte(webScript), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustGsv(t, "config", "set", "config/ai/provider", "scripted")
	d.mustGsv(t, "config", "set", "config/ai/script", "/home/root/web.jsonl")
	link := strings.TrimSpace(d.mustGsv(t, "login-link"))
	if want := fmt.Sprintf("http://127.0.0.1:%d/login#gsv_user_", port); !strings.HasPrefix(link, want) {
		t.Fatalf("gsv login-link: %q, want %s...", link, want)
	}
	ctx := browser(t)

	step(t, ctx, d,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#procs a.proc")), // the init process
		screenshot(t, "processes"),
		chromedp.SetValue(chromedp.ID("spawn-label"), "web"),
		chromedp.Click(chromedp.CSS("#page-procs form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SendKeys(chromedp.ID("chat-input"), "hello from the browser"),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS("#run-controls .approval button.approve")),
	)
	if s := text(t, ctx, "#streaming"); !strings.Contains(s, "streamed reply before the tool") {
		t.Fatalf("streamed bubble %q", s)
	}
	step(t, ctx, d,
		screenshot(t, "approval"),
		chromedp.Click(chromedp.CSS("#run-controls .approval button.approve")),
		chromedp.WaitVisible(chromedp.Search(`//div[contains(@class,"msg") and contains(., "all done after approval")]`)),
		screenshot(t, "chat"),
	)
	if got, err := os.ReadFile(filepath.Join(d.state, "fs/home/root/web-approved.txt")); err != nil || string(got) != "from-the-web\n" {
		t.Fatalf("the approved command's file: %q %v", got, err)
	}

	// A crontab line that does not parse: its error is shown under the
	// editor, and nothing is saved.
	step(t, ctx, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/schedules", port)),
		chromedp.WaitVisible(chromedp.ID("crontab")),
		chromedp.SetValue(chromedp.ID("crontab"), "61 * * * * not a minute\n"),
		chromedp.Click(chromedp.ID("crontab-save")),
		chromedp.WaitVisible(chromedp.CSS("#crontab-status .error")),
		screenshot(t, "schedules"),
	)
	if s := text(t, ctx, "#crontab-status"); !strings.Contains(s, "line 1") {
		t.Fatalf("crontab error %q", s)
	}

	// The file browser: the approved command's file, opened in the editor.
	step(t, ctx, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/files/home/root", port)),
		chromedp.Click(chromedp.Search(`//ul[contains(@class,"listing")]//a[text()="web-approved.txt"]`)),
		chromedp.WaitVisible(chromedp.CSS("textarea.editor")),
		screenshot(t, "files"),
	)
	if v, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS("textarea.editor"))); err != nil || v != "from-the-web\n" {
		t.Fatalf("editor %q %v", v, err)
	}

	// A device: its files browsed and a command run on it from the page.
	node := strings.TrimSpace(d.mustGsv(t, "token", "create", "--kind", "node", "--device", "laptop"))
	export := t.TempDir()
	os.MkdirAll(filepath.Join(export, "project"), 0o755)
	os.WriteFile(filepath.Join(export, "project", "README.md"), []byte("hello from the laptop\n"), 0o644)
	startDevice(t, "--kernel", listen, "--id", "laptop", "--token", node, "--root", export)
	waitFor(t, liveness, "the device online", func() bool {
		r := gsvAs(0, []string{"GSV_ADDR=unix!" + d.sock}, "call", "sys.device.get", `{"deviceId":"laptop"}`)
		return r.code == 0 && strings.Contains(r.stdout, `"online": true`)
	})
	step(t, ctx, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/devices/laptop", port)),
		chromedp.Click(chromedp.Search(`//ul[contains(@class,"listing")]//a[text()="project/"]`)),
		chromedp.Click(chromedp.Search(`//ul[contains(@class,"listing")]//a[text()="README.md"]`)),
		chromedp.WaitVisible(chromedp.CSS("#page-devices textarea.editor")),
		chromedp.SendKeys(chromedp.CSS("#page-devices input.command"), "cat project/README.md"),
		chromedp.Click(chromedp.CSS("#page-devices .shell button[type=submit]")),
		chromedp.WaitVisible(chromedp.Search(`//pre[contains(@class,"output") and contains(., "hello from the laptop")]`)),
		screenshot(t, "device"),
	)

	// An exec session: a command run in it from the page.
	sid := strings.TrimSpace(d.mustGsv(t, "session", "open"))
	step(t, ctx, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/sessions/%s", port, sid)),
		chromedp.WaitVisible(chromedp.CSS("#page-sessions input.command")),
		chromedp.SendKeys(chromedp.CSS("#page-sessions input.command"), "echo from-a-web-session"),
		chromedp.Click(chromedp.CSS("#page-sessions form button[type=submit]")),
		chromedp.WaitVisible(chromedp.Search(`//pre[contains(., "from-a-web-session")]`)),
	)

	// On a phone's screen.
	step(t, ctx, d,
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/procs", port)),
		chromedp.WaitVisible(chromedp.CSS("#procs a.proc")),
		screenshot(t, "phone"),
		chromedp.EmulateViewport(1000, 800),
	)

	// A supervised run parks at its checkpoint; a refocus from the page
	// reaches the model, which answers.
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/web2.jsonl"), []byte(webCheckpointScript), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustGsv(t, "config", "set", "config/ai/script", "/home/root/web2.jsonl")
	step(t, ctx, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/procs", port)),
		chromedp.WaitVisible(chromedp.CSS("#procs a.proc")),
		chromedp.SetValue(chromedp.ID("spawn-label"), "supervised"),
		chromedp.Click(chromedp.CSS("#page-procs form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
	)
	loc, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	_, pid, _ := strings.Cut(loc, "#/proc/")
	d.mustGsv(t, "call", "proc.run.control", fmt.Sprintf(`{"pid":%q,"supervise":true,"graceMs":3600000}`, pid))
	step(t, ctx, d,
		chromedp.SendKeys(chromedp.ID("chat-input"), "check the passwd file"),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS("#run-controls .checkpoint input.hint")),
		chromedp.SendKeys(chromedp.CSS("#run-controls .checkpoint input.hint"), "focus on the groups"),
		screenshot(t, "checkpoint"),
		chromedp.Click(chromedp.CSS("#run-controls .checkpoint button.refocus")),
		chromedp.WaitVisible(chromedp.Search(`//div[contains(@class,"msg") and contains(., "refocused on groups")]`)),
	)

	// The approvals page: a pending call denied there; the run goes on.
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/web3.jsonl"), []byte(webDenyScript), 0o644); err != nil {
		t.Fatal(err)
	}
	d.mustGsv(t, "config", "set", "config/ai/script", "/home/root/web3.jsonl")
	d.mustGsv(t, "call", "proc.run.control", fmt.Sprintf(`{"pid":%q,"supervise":false}`, pid))
	step(t, ctx, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/proc/%s", port, pid)),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
		chromedp.SendKeys(chromedp.ID("chat-input"), "try something risky"),
		chromedp.Click(chromedp.ID("chat-send")),
		chromedp.WaitVisible(chromedp.CSS("#run-controls .approval")),
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/approvals", port)),
		chromedp.Click(chromedp.CSS("#approvals .approval button.deny")),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="approvals"]/p[contains(., "Nothing waits for you")]`)),
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/proc/%s", port, pid)),
		chromedp.WaitVisible(chromedp.Search(`//div[contains(@class,"msg") and contains(., "denied, as you wish")]`)),
	)
	if _, err := os.Stat(filepath.Join(d.state, "fs/home/root/web-denied.txt")); err == nil {
		t.Fatal("the denied command ran")
	}

	// bob's session sees none of root's processes, and root's chat is
	// not his to read.
	d.mustGsv(t, "user", "add", "bob")
	var bobUID struct {
		Uid uint32 `json:"uid"`
	}
	for _, u := range strings.Split(d.mustGsv(t, "user", "list"), "\n") {
		if f := strings.Fields(u); len(f) > 1 && f[0] == "bob" {
			fmt.Sscan(f[1], &bobUID.Uid)
		}
	}
	bobTok := strings.TrimSpace(d.mustGsv(t, "token", "create", "--uid", fmt.Sprint(bobUID.Uid)))
	ctxBob := browser(t)
	step(t, ctxBob, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/login#%s", port, bobTok)),
		chromedp.WaitVisible(chromedp.CSS("#procs a.proc")),
	)
	if s := text(t, ctxBob, "#procs"); strings.Contains(s, "web") || strings.Contains(s, "init:0") || !strings.Contains(s, "init:") {
		t.Fatalf("bob's process list shows root's: %q", s)
	}
	step(t, ctxBob, d,
		chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/proc/init:0", port)),
		chromedp.WaitVisible(chromedp.CSS("#page-proc .error")),
	)

	// The link signed in once: a second browser is asked to sign in.
	ctx2 := browser(t)
	step(t, ctx2, d, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("form.login")))
	if s := text(t, ctx2, "form.login"); !strings.Contains(s, "Sign-in failed") {
		t.Fatalf("second use of the link: %q", s)
	}
}
