// Benchmarks of the web console (issue 25, "Speed"), measured in the same
// run against one daemon (`gsvfs serve --listen tcp!... --http ...`):
//
//   - roundtrip: a sys.whoami req/res over /ws (a Go WebSocket client on
//     loopback, signed in with a user token) against the same call over
//     9P, a held /sys/call fid (9fans client) on TCP with the same token,
//     and on the daemon's unix socket; alternately, b.N of each. The
//     target is ws/9P(TCP) <= 1.3.
//   - firstpaint: headless Chromium (chromedp) loads the console's
//     process list; the figure is the app's performance mark
//     "gsv:procs-rendered" (set once the list's rows are in the DOM),
//     which counts from the navigation's start. Target < 300 ms.
//   - delta: a scripted model streams pieces that carry their emit time
//     (model.EmitMarker, µs since the epoch); the page's MutationObserver
//     on the chat takes each piece's arrival time
//     (performance.timeOrigin + performance.now()) the moment it is in
//     the DOM. Daemon and browser share the host's clock. Target: every
//     piece < 50 ms after its emit.
//
// Figures are printed, never asserted.
package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/proc/model"
)

// The targets.
const (
	targetWSRatio    = 1.3
	targetFirstPaint = 300 * time.Millisecond
	targetDelta      = 50 * time.Millisecond
)

// webWSConns is how many /ws connections the round trip spreads its
// calls over, each read by the daemon at most 1000 frames a second (web.Options.FrameRate).
const webWSConns = 8

// webDeltaTurns is the number of turns in the delta's script.
const webDeltaTurns = 1500

// webDeltaPieces is the number of pieces each scripted turn streams.
const webDeltaPieces = 20

func BenchmarkWebConsole(b *testing.B) {
	requireRoot(b)
	port := freePort(b)
	listen := fmt.Sprintf("tcp!127.0.0.1!%d", freePort(b))
	d := startDaemon(b, newBase(b), daemonOpts{logLevel: "warn", listen: listen, args: []string{"--http", fmt.Sprintf("127.0.0.1:%d", port)}})
	var script strings.Builder
	for range webDeltaTurns {
		script.WriteString(`{"text":"` + strings.Repeat(model.EmitMarker+" ", webDeltaPieces) + `"}` + "\n")
	}
	if err := os.WriteFile(filepath.Join(d.state, "fs/home/root/bench.jsonl"), []byte(script.String()), 0o644); err != nil {
		b.Fatal(err)
	}
	d.mustGsv(b, "config", "set", "config/ai/provider", "scripted")
	d.mustGsv(b, "config", "set", "config/ai/script", "/home/root/bench.jsonl")
	token := strings.TrimSpace(d.mustGsv(b, "token", "create"))
	summary := map[string]string{}

	b.Run("roundtrip", func(b *testing.B) {
		ctx := context.Background()
		// The daemon reads each connection at most 1000 frames a
		// second (a policy, not a cost): the calls go round-robin over
		// enough connections that none reaches it, as a page's few
		// frames a second never do.
		conns := make([]*websocket.Conn, webWSConns)
		for i := range conns {
			c, _, err := websocket.Dial(ctx, fmt.Sprintf("ws://127.0.0.1:%d/ws", port), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseNow()
			conns[i] = c
		}
		next := 0
		rt := func(frame []byte, want string) error {
			c := conns[next%len(conns)]
			next++
			if err := c.Write(ctx, websocket.MessageText, frame); err != nil {
				return err
			}
			for {
				_, msg, err := c.Read(ctx)
				if err != nil {
					return err
				}
				if strings.HasPrefix(string(msg), `{"type":"res"`) {
					if !strings.Contains(string(msg), want) {
						return fmt.Errorf("answer %s", msg)
					}
					return nil
				}
			}
		}
		for i := range conns {
			conn, _ := json.Marshal(map[string]any{"type": "req", "id": "c", "call": "sys.connect", "args": map[string]any{
				"protocol": 2, "client": map[string]any{"id": fmt.Sprint("bench-", i), "version": "1", "platform": "go", "role": "user"},
				"auth": map[string]any{"username": "", "token": token}}})
			if err := rt(conn, `"ok":true`); err != nil {
				b.Fatalf("sys.connect over /ws: %v", err)
			}
		}
		tcp, err := ninep.Mount(listen, "", []byte(token))
		if err != nil {
			b.Fatalf("9P on %s: %v", listen, err)
		}
		b.Cleanup(func() { tcp.Close() })
		th, uh := openHeld(b, tcp), openHeld(b, d.dial(b))
		wsReq := []byte(`{"type":"req","id":"w","call":"sys.whoami"}`)
		req := []byte(`{"call":"sys.whoami","args":{}}` + "\n")
		var wt, tt, ut []time.Duration
		w := &devSide{name: "sys.whoami over /ws", op: timed(&wt, func() error { return rt(wsReq, `"uid":0`) })}
		t9 := &devSide{name: "sys.whoami over 9P (TCP)", op: timed(&tt, func() error { return th.do(req, `"uid":0`) })}
		u9 := &devSide{name: "sys.whoami over 9P (unix)", op: timed(&ut, func() error { return uh.do(req, `"uid":0`) })}
		devInterleave(b, nil, w, t9, u9)
		ratio := w.ms() / t9.ms()
		b.ReportMetric(w.ms()*1000, "ws-us")
		b.ReportMetric(t9.ms()*1000, "9p-tcp-us")
		b.ReportMetric(u9.ms()*1000, "9p-unix-us")
		b.ReportMetric(ratio, "ws/9p")
		summary["roundtrip"] = fmt.Sprintf("sys.whoami over /ws %.0f µs, over 9P /sys/call (held fid) on TCP %.0f µs, on the unix socket %.0f µs: ws/9P(TCP) %.2f (target <= %.1f) %s, ws/9P(unix) %.2f; medians %.0f / %.0f / %.0f µs  [n=%d]",
			w.ms()*1000, t9.ms()*1000, u9.ms()*1000, ratio, targetWSRatio, devVerdict(ratio <= targetWSRatio), w.ms()/u9.ms(),
			us(median(wt)), us(median(tt)), us(median(ut)), b.N)
	})

	link := strings.TrimSpace(d.mustGsv(b, "login-link"))
	ctx := browser(b)
	step(b, ctx, d, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#procs a.proc")))
	procs := fmt.Sprintf("http://127.0.0.1:%d/#/procs", port)

	b.Run("firstpaint", func(b *testing.B) {
		var paints []time.Duration
		for b.Loop() {
			step(b, ctx, d,
				chromedp.Navigate("about:blank"),
				chromedp.Navigate(procs),
				chromedp.WaitVisible(chromedp.CSS("#procs a.proc")),
			)
			ms, err := chromedp.Run(ctx, chromedp.Evaluate[float64](`performance.getEntriesByName("gsv:procs-rendered")[0].startTime`))
			if err != nil {
				b.Fatalf("the mark: %v", err)
			}
			paints = append(paints, time.Duration(ms*float64(time.Millisecond)))
		}
		med, worst := median(paints), slices.Max(paints)
		b.ReportMetric(float64(med)/1e6, "paint-median-ms")
		b.ReportMetric(float64(worst)/1e6, "paint-max-ms")
		summary["firstpaint"] = fmt.Sprintf("the process list's rows in the DOM after navigation start: median %.0f ms, max %.0f ms (target < %d ms) %s  [n=%d]",
			float64(med)/1e6, float64(worst)/1e6, targetFirstPaint.Milliseconds(), devVerdict(worst < targetFirstPaint), len(paints))
	})

	b.Run("delta", func(b *testing.B) {
		fsys := d.dial(b)
		var sp struct{ Pid string }
		mustOK(b, call9p(b, fsys, "proc.spawn", map[string]any{"profile": "task", "label": "bench"}), &sp)
		step(b, ctx, d,
			chromedp.Navigate(fmt.Sprintf("http://127.0.0.1:%d/#/proc/%s", port, sp.Pid)),
			chromedp.WaitVisible(chromedp.ID("chat-input")),
		)
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](webDeltaObserver)); err != nil {
			b.Fatalf("observer: %v", err)
		}
		// A Go client on /ws takes the same pieces' arrival: the daemon's
		// share of the delay, without the browser's.
		wctx, wcancel := context.WithCancel(context.Background())
		defer wcancel()
		wc, _, err := websocket.Dial(wctx, fmt.Sprintf("ws://127.0.0.1:%d/ws", port), nil)
		if err != nil {
			b.Fatal(err)
		}
		defer wc.CloseNow()
		cf, _ := json.Marshal(map[string]any{"type": "req", "id": "c", "call": "sys.connect", "args": map[string]any{
			"protocol": 2, "client": map[string]any{"id": "bench-delta", "version": "1", "platform": "go", "role": "user"},
			"auth": map[string]any{"username": "", "token": token}}})
		if err := wc.Write(wctx, websocket.MessageText, cf); err != nil {
			b.Fatal(err)
		}
		var goLat []time.Duration
		goDone := make(chan struct{})
		go func() {
			defer close(goDone)
			for {
				_, msg, err := wc.Read(wctx)
				if err != nil {
					return
				}
				now := time.Now().UnixMicro()
				var f struct {
					Signal  string
					Payload struct{ Text string }
				}
				if json.Unmarshal(msg, &f) != nil || f.Signal != "proc.run.stream" {
					continue
				}
				for _, tok := range strings.Fields(f.Payload.Text) {
					var emit int64
					if _, err := fmt.Sscan(tok, &emit); err == nil {
						goLat = append(goLat, time.Duration(now-emit)*time.Microsecond)
					}
				}
			}
		}()
		turns := 0
		for b.Loop() {
			turns++
			if turns > webDeltaTurns {
				b.Fatalf("the script has %d turns: a shorter -benchtime", webDeltaTurns)
			}
			mustOK(b, call9p(b, fsys, "proc.send", map[string]any{"pid": sp.Pid, "message": fmt.Sprint("turn ", turns)}), nil)
			wait := fmt.Sprintf(`window.__gsvLat.length >= %d && !document.getElementById("streaming") && document.querySelectorAll("#chat .msg.assistant").length >= %d`, turns*webDeltaPieces, turns)
			step(b, ctx, d, chromedp.Poll[chromedp.Void](wait, chromedp.WithPollingInterval(10*time.Millisecond)))
		}
		lat, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`window.__gsvLat`))
		if err != nil || len(lat) == 0 {
			b.Fatalf("latencies %v %v", lat, err)
		}
		idx, _ := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`window.__gsvIdx`))
		sum := make([]float64, webDeltaPieces)
		cnt := make([]float64, webDeltaPieces)
		for i := range lat {
			sum[int(idx[i])] += lat[i]
			cnt[int(idx[i])]++
		}
		ds := make([]time.Duration, len(lat))
		for i, l := range lat {
			ds[i] = time.Duration(l * float64(time.Microsecond))
		}
		wcancel()
		<-goDone
		slices.Sort(ds)
		slices.Sort(goLat)
		var g50, gmax time.Duration
		if len(goLat) > 0 {
			g50, gmax = goLat[len(goLat)/2], goLat[len(goLat)-1]
		}
		p50, p99, worst := ds[len(ds)/2], ds[len(ds)*99/100], ds[len(ds)-1]
		b.ReportMetric(float64(p50)/1e6, "delta-p50-ms")
		b.ReportMetric(float64(worst)/1e6, "delta-max-ms")
		summary["delta"] = fmt.Sprintf("a streamed piece in the page's DOM after the model emits it: p50 %.1f ms, p99 %.1f ms, max %.1f ms (target < %d ms) %s  [%d pieces in %d turns]; mean of a turn's first piece %.1f ms, of its last %.1f ms; to a Go client on /ws: p50 %.1f ms, max %.1f ms",
			float64(p50)/1e6, float64(p99)/1e6, float64(worst)/1e6, targetDelta.Milliseconds(), devVerdict(worst < targetDelta), len(ds), turns, sum[0]/cnt[0]/1000, sum[webDeltaPieces-1]/cnt[webDeltaPieces-1]/1000, float64(g50)/1e6, float64(gmax)/1e6)
	})

	fmt.Println("\n=== gsvfs web console: /ws vs 9P, first paint and stream latency in Chromium (same run) ===")
	for _, n := range []string{"roundtrip", "firstpaint", "delta"} {
		if l, ok := summary[n]; ok {
			fmt.Printf("%-11s %s\n", n, l)
		}
	}
	fmt.Println()
}

// webDeltaObserver installs, in the chat page, an observer that appends
// to window.__gsvLat each streamed piece's delay in µs (its arrival in
// the DOM less the emit time the piece carries) and to window.__gsvIdx
// its place in its turn.
const webDeltaObserver = `(() => {
  window.__gsvLat = [];
  window.__gsvIdx = [];
  let el = null, seen = 0;
  new MutationObserver(() => {
    const now = (performance.timeOrigin + performance.now()) * 1000;
    const s = document.querySelector("#streaming .text");
    if (!s) return;
    if (s !== el) { el = s; seen = 0; }
    const toks = s.textContent.trim().split(/\s+/);
    for (; seen < toks.length; seen++) { window.__gsvLat.push(now - Number(toks[seen])); window.__gsvIdx.push(seen); }
  }).observe(document.getElementById("chat"), { childList: true, subtree: true, characterData: true });
  return true;
})()`

// us is d in µs.
func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 }
