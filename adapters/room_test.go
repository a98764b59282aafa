package adapters

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc"
	"gsvfs.dev/gsvfs/proc/model"
)

// harness is a kernel with the devices, proc (the offline model) and
// adapters rooms, as gsvfs wires them, and an irc bridge's identity of
// alice's.
type harness struct {
	t *testing.T
	*kerneltest.Env
	r      *Room
	bridge *kernel.Caller
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	e := kerneltest.Open(t)
	ctx := context.Background()
	space := ns.New(e.K)
	t.Cleanup(func() { space.Close() })
	dev, err := devices.New(e.K, devices.Options{Local: local.Options{Logger: kerneltest.Quiet()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, dev); err != nil {
		t.Fatal(err)
	}
	dev.SetRoot(space.Root())
	offline := func(context.Context, uint32) (model.Provider, string, error) { return model.Offline{}, "offline", nil }
	pm, err := proc.Open(space, proc.Options{Logger: kerneltest.Quiet(), Provider: offline})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, pm); err != nil {
		t.Fatal(err)
	}
	r, err := Open(space, Options{Logger: kerneltest.Quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if err := space.Add(ctx, r); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, Env: e, r: r}
	h.bridge = h.serviceCaller(e.Alice, "irc")
	h.mustDo(abi.AdapterStateUpdate.Name, h.bridge, &abi.AdapterStateArgs{Adapter: "irc", AccountID: "net", Status: abi.AdapterAccountStatus{AccountID: "net", Connected: true}})
	return h
}

// serviceCaller is the identity a service token of id's bound to kind
// attaches as.
func (h *harness) serviceCaller(id *kernel.Identity, kind string) *kernel.Caller {
	h.t.Helper()
	ctx := context.Background()
	res, err := kernel.Do(ctx, h.K, kerneltest.Caller(id), abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "service", AllowedAdapter: &kind})
	if err != nil {
		h.t.Fatal(err)
	}
	sid, err := h.K.Authenticate(ctx, kernel.Peer{Transport: "9p-tcp", HostUID: -1, Secret: []byte(res.Token.Token)})
	if err != nil {
		h.t.Fatal(err)
	}
	return kerneltest.Caller(sid)
}

// call makes a syscall by name with args (as a request frame's would be).
func (h *harness) call(name string, c *kernel.Caller, args any) (any, error) {
	return h.K.Call(context.Background(), c, name, args)
}

func (h *harness) mustDo(name string, c *kernel.Caller, args any) any {
	h.t.Helper()
	res, err := h.call(name, c, args)
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	return res
}

// in hands the bridge's account a message.
func (h *harness) in(kind, id, actor, text string, mentioned bool) (*abi.AdapterInboundResult, error) {
	sk := "dm"
	sid := actor
	if kind != "dm" {
		sk, sid = kind, "#chan"
	}
	res, err := kernel.Do(context.Background(), h.K, h.bridge, abi.AdapterInbound, &abi.AdapterInboundArgs{Adapter: "irc", AccountID: "net",
		Message: abi.AdapterMessage{MessageID: id, Surface: abi.AdapterSurface{Kind: sk, ID: sid}, Actor: &abi.AdapterActor{ID: actor}, Text: text, WasMentioned: mentioned}})
	return res, err
}

// next takes the bridge's next deliveries, waiting for one.
func (h *harness) next() []abi.AdapterDelivery {
	h.t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		res, err := kernel.Do(context.Background(), h.K, h.bridge, abi.AdapterOutboxNext, &abi.AdapterOutboxNextArgs{Adapter: "irc", AccountID: "net", Session: "s1", WaitMs: 5000})
		if err != nil {
			h.t.Fatal(err)
		}
		if len(res.Deliveries) > 0 {
			for _, d := range res.Deliveries {
				kernel.Do(context.Background(), h.K, h.bridge, abi.AdapterOutboxDone, &abi.AdapterOutboxDoneArgs{Adapter: "irc", AccountID: "net", DeliveryID: d.DeliveryID, MessageIDs: []string{"m-" + d.DeliveryID}})
			}
			return res.Deliveries
		}
	}
	h.t.Fatal("no delivery")
	return nil
}

// link links actor to id through a challenge, as gsv link does.
func (h *harness) link(id *kernel.Identity, actor string) {
	h.t.Helper()
	res, err := h.in("dm", "link-"+actor, actor, "hi", false)
	if err != nil || res.Status != "challenge" {
		h.t.Fatalf("challenge: %+v %v", res, err)
	}
	h.mustDo(abi.SysLinkConsume.Name, kerneltest.Caller(id), &abi.LinkConsumeArgs{Code: strings.ToLower(res.Challenge.Code)})
}

var codeRE = regexp.MustCompile(`^[A-Z2-9]{4}-[A-Z2-9]{4}$`)

func TestLinkChatReplyReplay(t *testing.T) {
	h := newHarness(t)
	res, err := h.in("dm", "1", "al", "hello", false)
	if err != nil || res.Status != "challenge" || !codeRE.MatchString(res.Challenge.Code) || !strings.Contains(res.Reply.Text, "gsv link "+res.Challenge.Code) {
		t.Fatalf("unlinked DM: %+v %v", res, err)
	}
	again, _ := h.in("dm", "2", "al", "hello?", false)
	if again.Challenge == nil || again.Challenge.Code != res.Challenge.Code {
		t.Fatalf("a second DM got another code: %+v", again)
	}
	if g, _ := h.in("group", "3", "al", "hello all", true); g.Status != "dropped" || g.DroppedReason != "unlinked_actor" {
		t.Fatalf("unlinked group message: %+v", g)
	}
	h.mustDo(abi.SysLinkConsume.Name, kerneltest.Caller(h.Alice), &abi.LinkConsumeArgs{Code: res.Challenge.Code})
	if _, err := h.call(abi.SysLinkConsume.Name, kerneltest.Caller(h.Bob), &abi.LinkConsumeArgs{Code: res.Challenge.Code}); err == nil {
		t.Fatal("a used code linked again")
	}
	// The message's source is alice, whatever the platform calls her.
	d, err := h.in("dm", "4", "al", "hello agent", false)
	if err != nil || d.Status != "delivered" || d.Delivered.Pid != fmt.Sprintf("init:%d", h.Alice.Uid) {
		t.Fatalf("linked DM: %+v %v", d, err)
	}
	out := h.next()
	if len(out) != 1 || out[0].DeliveryID != "reply:"+d.Delivered.RunID || !strings.Contains(out[0].Text, "You said: hello agent") ||
		out[0].Surface.ID != "al" || out[0].ReplyToID != "4" {
		t.Fatalf("the reply: %+v", out)
	}
	hist, err := kernel.Do(context.Background(), h.K, kerneltest.Caller(h.Alice), abi.ProcHistory, &abi.HistoryArgs{Pid: d.Delivered.Pid})
	if err != nil {
		t.Fatal(err)
	}
	var src *abi.EventSource
	for _, m := range hist.Messages {
		if m.Kind == "adapter.message" {
			src = m.Source
		}
	}
	if src == nil || src.Uid != h.Alice.Uid || src.Kind != "user" {
		t.Fatalf("the message's source %+v", src)
	}
	// A replay does nothing.
	rep, err := h.in("dm", "4", "al", "hello agent", false)
	if err != nil || rep.Status != "replayed" || rep.Delivered == nil || rep.Delivered.RunID != d.Delivered.RunID {
		t.Fatalf("replay: %+v %v", rep, err)
	}
	st := h.mustDo(abi.AdapterStatus.Name, kerneltest.Caller(h.Alice), &abi.AdapterStatusArgs{Adapter: "irc"}).(*abi.AdapterStatusResult)
	if len(st.Accounts) != 1 || st.Accounts[0].Ledger["sent"] != 1 || st.Accounts[0].Ledger["pending"] != 0 {
		t.Fatalf("status after a replay: %+v", st)
	}
	// Chat commands.
	if w, _ := h.in("dm", "5", "al", "/where", false); w.Status != "command" || !strings.Contains(w.Reply.Text, d.Delivered.Pid) {
		t.Fatalf("/where: %+v", w)
	}
	if w, _ := h.in("dm", "6", "al", "/use p_nope", false); !strings.HasPrefix(w.Reply.Text, "error:") {
		t.Fatalf("/use of no process: %+v", w.Reply)
	}
}

func TestAdapterAbuse(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	wantKind := func(what string, err error, k abi.Kind) {
		t.Helper()
		if abi.KindOf(err) != k {
			t.Errorf("%s: %v, want %d", what, err, k)
		}
	}
	// A bridge's token makes no user's calls, and speaks for its kind only.
	_, err := h.call(abi.ProcSend.Name, h.bridge, &abi.SendArgs{Pid: fmt.Sprintf("init:%d", h.Alice.Uid), Message: "x"})
	wantKind("proc.send by a bridge", err, abi.Permission)
	_, err = h.call(abi.SysLink.Name, h.bridge, &abi.LinkArgs{Adapter: "irc", AccountID: "net", ActorID: "x", Uid: &h.Alice.Uid})
	wantKind("sys.link by a bridge", err, abi.Permission)
	_, err = kernel.Do(ctx, h.K, h.bridge, abi.AdapterInbound, &abi.AdapterInboundArgs{Adapter: "slack", AccountID: "net",
		Message: abi.AdapterMessage{MessageID: "1", Surface: abi.AdapterSurface{Kind: "dm", ID: "x"}, Actor: &abi.AdapterActor{ID: "x"}}})
	wantKind("inbound for another kind", err, abi.Permission)
	_, err = h.call(abi.AdapterInbound.Name, kerneltest.Caller(h.Alice), &abi.AdapterInboundArgs{Adapter: "irc", AccountID: "net"})
	wantKind("inbound by a user", err, abi.Permission)
	// An unknown account; another user's bridge on alice's account.
	_, err = kernel.Do(ctx, h.K, h.bridge, abi.AdapterInbound, &abi.AdapterInboundArgs{Adapter: "irc", AccountID: "other",
		Message: abi.AdapterMessage{MessageID: "1", Surface: abi.AdapterSurface{Kind: "dm", ID: "x"}, Actor: &abi.AdapterActor{ID: "x"}}})
	wantKind("inbound for an unknown account", err, abi.NotExist)
	bobs := h.serviceCaller(h.Bob, "irc")
	_, err = kernel.Do(ctx, h.K, bobs, abi.AdapterStateUpdate, &abi.AdapterStateArgs{Adapter: "irc", AccountID: "net"})
	wantKind("another user's bridge on the account", err, abi.Permission)
	// A message too large.
	_, err = h.in("dm", "big", "x", strings.Repeat("a", 10<<20), false)
	wantKind("a 10 MB message", err, abi.Invalid)
	if err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a 10 MB message: %v", err)
	}
	// Brute force: locked after MaxLinkTries wrong codes, even for a right one.
	res, _ := h.in("dm", "c", "victim", "hi", false)
	for i := 0; i < MaxLinkTries; i++ {
		_, err := h.call(abi.SysLinkConsume.Name, kerneltest.Caller(h.Bob), &abi.LinkConsumeArgs{Code: fmt.Sprintf("AAAA-AA%02d", i)})
		wantKind("a wrong code", err, abi.Invalid)
	}
	_, err = h.call(abi.SysLinkConsume.Name, kerneltest.Caller(h.Bob), &abi.LinkConsumeArgs{Code: res.Challenge.Code})
	wantKind("a right code once locked", err, abi.Permission)
	if _, err := h.call(abi.SysLinkConsume.Name, kerneltest.Caller(h.Alice), &abi.LinkConsumeArgs{Code: res.Challenge.Code}); err != nil {
		t.Fatalf("another user's right code: %v", err)
	}
}

// TestUnlinkedFlood: 10,000 DMs from unlinked actors leave the tables
// bounded (MaxLiveChallenges codes, no receipt).
func TestUnlinkedFlood(t *testing.T) {
	h := newHarness(t)
	n := 10000
	if testing.Short() {
		n = 500
	}
	dropped := 0
	for i := 0; i < n; i++ {
		res, err := h.in("dm", fmt.Sprint("f", i), fmt.Sprint("stranger", i), "hi", false)
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == "dropped" {
			dropped++
		}
	}
	count := func(table string) int {
		var c int
		if err := h.K.Store.QueryRowContext(context.Background(), `SELECT count(*) FROM `+table).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := count("adapter_challenges"); c != MaxLiveChallenges {
		t.Errorf("%d challenges, want %d", c, MaxLiveChallenges)
	}
	if c := count("adapter_receipts"); c != 0 {
		t.Errorf("%d receipts of unlinked messages", c)
	}
	if dropped != n-MaxLiveChallenges {
		t.Errorf("%d dropped of %d", dropped, n)
	}
}

func TestApprovalInChat(t *testing.T) {
	h := newHarness(t)
	h.link(h.Alice, "al")
	h.link(h.Bob, "bo")
	d, err := h.in("group", "1", "al", `delete it:`+"\n"+`use Delete {"path":"~/gone.txt"}`, true)
	if err != nil || d.Status != "delivered" {
		t.Fatalf("%+v %v", d, err)
	}
	out := h.next()
	if len(out) != 1 || !strings.HasPrefix(out[0].DeliveryID, "hil:") || !strings.Contains(out[0].Text, "yes / no / always") || out[0].Surface.ID != "#chan" {
		t.Fatalf("the approval request: %+v", out)
	}
	// bob's yes is not an answer: it is a message of his, dropped for not
	// mentioning the bot.
	if b, _ := h.in("group", "2", "bo", "yes", false); b.Status != "dropped" {
		t.Fatalf("bob's yes: %+v", b)
	}
	a, err := h.in("group", "3", "al", "no", false)
	if err != nil || a.Status != "approval" || a.Reply.Text != "Denied." {
		t.Fatalf("alice's no: %+v %v", a, err)
	}
	out = h.next()
	if len(out) != 1 || out[0].DeliveryID != "reply:"+d.Delivered.RunID {
		t.Fatalf("the reply: %+v", out)
	}
}

// TestCheckpointInChat: a run that spends its budget parks and asks its
// chat; "continue" from the linked user goes on.
func TestCheckpointInChat(t *testing.T) {
	h := newHarness(t)
	h.link(h.Alice, "al")
	pid := fmt.Sprintf("init:%d", h.Alice.Uid)
	h.mustDo(abi.ProcRunControl.Name, kerneltest.Caller(h.Alice), &abi.RunControlArgs{Pid: pid, Budget: &abi.RunBudget{Turns: 1}})
	d, err := h.in("dm", "1", "al", "two reads:\nuse Read {\"path\":\"~\"}\nuse Read {\"path\":\"~\"}", false)
	if err != nil || d.Status != "delivered" {
		t.Fatalf("%+v %v", d, err)
	}
	out := h.next()
	if len(out) != 1 || !strings.Contains(out[0].Text, "continue / stop") {
		t.Fatalf("the checkpoint: %+v", out)
	}
	a, err := h.in("dm", "2", "al", "Continue", false)
	if err != nil || a.Status != "approval" || a.Reply.Text != "Continuing." {
		t.Fatalf("continue: %+v %v", a, err)
	}
	out = h.next()
	if len(out) != 1 || out[0].DeliveryID != "reply:"+d.Delivered.RunID {
		t.Fatalf("the reply: %+v", out)
	}
}

// TestMediaInChat: a linked message's media go to proc.send as they came:
// the model sees the image.
func TestMediaInChat(t *testing.T) {
	h := newHarness(t)
	h.link(h.Alice, "al")
	res, err := kernel.Do(context.Background(), h.K, h.bridge, abi.AdapterInbound, &abi.AdapterInboundArgs{Adapter: "irc", AccountID: "net",
		Message: abi.AdapterMessage{MessageID: "p1", Surface: abi.AdapterSurface{Kind: "dm", ID: "al"}, Actor: &abi.AdapterActor{ID: "al"}, Text: "look",
			Media: []abi.MediaInput{{Type: "image", MimeType: "image/png", Data: "iVBORw0KGgo="}}}})
	if err != nil || res.Status != "delivered" {
		t.Fatalf("%+v %v", res, err)
	}
	out := h.next()
	if len(out) != 1 || !strings.Contains(out[0].Text, "image/png") {
		t.Fatalf("the reply: %+v", out)
	}
}

// TestReceiptWithoutOutcome: a message whose receipt was claimed by a
// delivery that recorded no outcome (the daemon died between the claim
// and the send, or after the send) is delivered on its replay, once:
// the send's idempotency key keeps a send that did enter from entering
// twice, and the reply goes out once; a command's replay does nothing.
func TestReceiptWithoutOutcome(t *testing.T) {
	h := newHarness(t)
	h.link(h.Alice, "al")
	ctx := context.Background()
	// Died before the send: the receipt alone.
	if ok, _, err := h.r.claimReceipt(ctx, "irc", "net", "7", h.Alice.Uid); err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	d, err := h.in("dm", "7", "al", "first words", false)
	if err != nil || d.Status != "delivered" {
		t.Fatalf("replay of a receipt without its send: %+v %v", d, err)
	}
	out := h.next()
	if len(out) != 1 || !strings.Contains(out[0].Text, "You said: first words") {
		t.Fatalf("the reply: %+v", out)
	}
	// Died after the send, before its outcome was noted.
	if _, err := h.r.st.Exec(ctx, `UPDATE adapter_receipts SET run_id='' WHERE message_id='7'`); err != nil {
		t.Fatal(err)
	}
	again, err := h.in("dm", "7", "al", "first words", false)
	if err != nil || again.Status != "delivered" || again.Delivered.RunID != d.Delivered.RunID {
		t.Fatalf("replay after the send: %+v %v, want run %s again", again, err, d.Delivered.RunID)
	}
	if rep, err := h.in("dm", "7", "al", "first words", false); err != nil || rep.Status != "replayed" {
		t.Fatalf("a replay once its outcome is noted: %+v %v", rep, err)
	}
	hist, err := kernel.Do(ctx, h.K, kerneltest.Caller(h.Alice), abi.ProcHistory, &abi.HistoryArgs{Pid: d.Delivered.Pid})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, m := range hist.Messages {
		if m.Kind == "adapter.message" && strings.Contains(string(m.Content), "first words") {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d messages of the replayed message, want 1", n)
	}
	st := h.mustDo(abi.AdapterStatus.Name, kerneltest.Caller(h.Alice), &abi.AdapterStatusArgs{Adapter: "irc"}).(*abi.AdapterStatusResult)
	if st.Accounts[0].Ledger["sent"] != 1 || st.Accounts[0].Ledger["pending"] != 0 {
		t.Fatalf("the ledger: %+v, want the one reply sent", st.Accounts[0].Ledger)
	}
	if w, _ := h.in("dm", "8", "al", "/where", false); w.Status != "command" {
		t.Fatalf("/where: %+v", w)
	}
	if w, _ := h.in("dm", "8", "al", "/where", false); w.Status != "replayed" {
		t.Fatalf("a command's replay: %+v", w)
	}
}
