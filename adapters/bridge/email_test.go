package bridge

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"gsvfs.dev/gsvfs/abi"
)

const (
	botAddr = "bot@gsv.test"
	botPass = "s3cret"
)

// mailServers is a real IMAP server (go-imap's imapserver with its
// in-memory backend) and a real SMTP server (go-smtp) on free loopback
// ports.
type mailServers struct {
	imapAddr, smtpAddr string

	mu   sync.Mutex // guards got, mode
	got  [][]byte   // mails the SMTP server accepted
	rcpt []string
	mode string // "", "refuse", "stall"
	gotC chan struct{}
	done chan struct{}
}

func startMailServers(t *testing.T) *mailServers {
	t.Helper()
	ms := &mailServers{gotC: make(chan struct{}, 10), done: make(chan struct{})}
	mem := imapmemserver.New()
	u := imapmemserver.NewUser(botAddr, botPass)
	if err := u.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	mem.AddUser(u)
	is := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}},
		InsecureAuth: true,
		Logger:       nopLogger{},
	})
	il, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go is.Serve(il)
	ms.imapAddr = il.Addr().String()

	ss := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) { return &smtpSession{ms: ms}, nil }))
	ss.Domain = "gsv.test"
	ss.AllowInsecureAuth = true
	ss.ErrorLog = nopLogger{}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ss.Serve(sl)
	ms.smtpAddr = sl.Addr().String()
	t.Cleanup(func() {
		close(ms.done)
		is.Close()
		ss.Close()
	})
	return ms
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}
func (nopLogger) Println(...any)        {}

type smtpSession struct {
	ms   *mailServers
	rcpt []string
}

func (s *smtpSession) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != botAddr || pass != botPass {
			return errors.New("bad credentials")
		}
		return nil
	}), nil
}
func (s *smtpSession) Reset()                               {}
func (s *smtpSession) Logout() error                        { return nil }
func (s *smtpSession) Mail(string, *smtp.MailOptions) error { return nil }
func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.rcpt = append(s.rcpt, to)
	return nil
}
func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.ms.mu.Lock()
	mode := s.ms.mode
	s.ms.mu.Unlock()
	switch mode {
	case "refuse":
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "refused"}
	case "stall":
		<-s.ms.done
		return nil
	}
	s.ms.mu.Lock()
	s.ms.got = append(s.ms.got, b)
	s.ms.rcpt = append(s.ms.rcpt, s.rcpt...)
	s.ms.mu.Unlock()
	s.ms.gotC <- struct{}{}
	return nil
}

// peer is another IMAP client of the bot's mailbox: it appends mails
// and reads flags, as a mail server's delivery and a person's client
// would.
func (ms *mailServers) peer(t *testing.T) *imapclient.Client {
	t.Helper()
	c, err := imapclient.DialInsecure(ms.imapAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Login(botAddr, botPass).Wait(); err != nil {
		t.Fatal(err)
	}
	return c
}

func appendMail(t *testing.T, c *imapclient.Client, raw string) {
	t.Helper()
	raw = strings.ReplaceAll(raw, "\n", "\r\n")
	cmd := c.Append("INBOX", int64(len(raw)), nil)
	io.WriteString(cmd, raw)
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// seen reports whether the mail with Message-ID id is flagged \Seen.
func seen(t *testing.T, c *imapclient.Client, id string) bool {
	t.Helper()
	if _, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	sd, err := c.UIDSearch(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-Id", Value: id}},
		Flag: []imap.Flag{imap.FlagSeen}}, nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	return len(sd.AllUIDs()) > 0
}

func newTestEmail(t *testing.T, ms *mailServers, extra map[string]string) *email {
	t.Helper()
	// idle_timeout 2: a mail the server tells of late (appended as the
	// IDLE starts, on a loaded machine) is searched for within seconds.
	opts := map[string]string{"imap": ms.imapAddr, "smtp": ms.smtpAddr, "from": "Gsv <" + botAddr + ">", "security": "insecure", "idle_timeout": "2"}
	for k, v := range extra {
		opts[k] = v
	}
	a, err := New("email", Config{Account: "mail", Secret: botPass, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	return a.(*email)
}

const adaMail = `From: Ada Lovelace <Ada@Example.test>
To: Gsv <bot@gsv.test>
Subject: deploy?
Date: Tue, 14 Nov 2023 22:13:20 +0000
Message-ID: <m1@example.test>
References: <m0@example.test>
In-Reply-To: <m0@example.test>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary=XX

--XX
Content-Type: text/plain; charset=utf-8

yes

On Mon, Nov 13, 2023, Gsv <bot@gsv.test> wrote:
> Run make deploy?
--XX
Content-Type: image/png
Content-Disposition: attachment; filename=shot.png
Content-Transfer-Encoding: base64

iVBORw0KZmFrZQ==
--XX--
`

// TestEmailEndToEnd: a mail put in the mailbox reaches the sink (the
// sender as actor and dm surface, the text without quoted history, the
// attachment as media), is flagged \Seen only after Deliver returned
// nil, and a reply goes out by SMTP threaded under it with the media.
func TestEmailEndToEnd(t *testing.T) {
	ms := startMailServers(t)
	peer := ms.peer(t)
	a := newTestEmail(t, ms, nil)
	sink := newFakeSink()
	gate := make(chan struct{})
	sink.gate = gate
	r := startRun(a, sink)
	defer r.stop(t)
	st := sink.waitConnected(t)
	if !st.Authenticated || st.Extra["address"] == "" {
		t.Errorf("state %+v", st)
	}
	appendMail(t, peer, adaMail) // arrives while the bridge idles

	got := sink.next(t)
	if got.MessageID != "m1@example.test" || got.Text != "yes" || got.ReplyToID != "m0@example.test" ||
		got.Surface != (abi.AdapterSurface{Kind: "dm", ID: "ada@example.test", Name: "Ada Lovelace"}) ||
		got.Actor == nil || got.Actor.ID != "ada@example.test" || got.Timestamp != 1700000000000 || !got.WasMentioned {
		t.Errorf("delivered %+v", got)
	}
	png, _ := base64.StdEncoding.DecodeString("iVBORw0KZmFrZQ==")
	if len(got.Media) != 1 || got.Media[0].Type != "image" || got.Media[0].Filename != "shot.png" ||
		got.Media[0].Data != base64.StdEncoding.EncodeToString(png) {
		t.Errorf("media %+v", got.Media)
	}
	if seen(t, peer, "m1@example.test") {
		t.Fatal("mail flagged \\Seen before Deliver returned")
	}
	close(gate)
	eventually(t, "mail flagged \\Seen after Deliver", func() bool { return seen(t, peer, "m1@example.test") })

	sent, err := a.Send(context.Background(), Outbound{Surface: got.Surface, Text: "deployed", ReplyToID: got.MessageID,
		Media: []abi.MediaInput{{Type: "document", MimeType: "text/csv", Data: base64.StdEncoding.EncodeToString([]byte("a,b\n")), Filename: "r.csv"}}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ms.gotC:
	case <-time.After(liveness):
		t.Fatal("no mail reached the SMTP server")
	}
	ms.mu.Lock()
	raw, rcpt := ms.got[0], ms.rcpt
	ms.mu.Unlock()
	if len(rcpt) != 1 || rcpt[0] != "ada@example.test" {
		t.Errorf("rcpt %v", rcpt)
	}
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	h := mr.Header
	subj, _ := h.Subject()
	mid, _ := h.MessageID()
	if subj != "Re: deploy?" || h.Get("In-Reply-To") != "<m1@example.test>" ||
		h.Get("References") != "<m0@example.test> <m1@example.test>" || mid != sent.MessageID {
		t.Errorf("reply headers: subject %q in-reply-to %q references %q id %q (sent %q)",
			subj, h.Get("In-Reply-To"), h.Get("References"), mid, sent.MessageID)
	}
	parsed, err := emailParse(raw, defaultMaxMedia)
	if err != nil || parsed.Text != "deployed" || len(parsed.Media) != 1 || parsed.Media[0].Filename != "r.csv" {
		t.Errorf("reply body %+v, %v", parsed, err)
	}
}

// TestEmailRedeliver: a Deliver error ends Run and leaves the mail
// unseen; the next Run delivers it again.
func TestEmailRedeliver(t *testing.T) {
	ms := startMailServers(t)
	peer := ms.peer(t)
	appendMail(t, peer, adaMail)
	a := newTestEmail(t, ms, nil)
	sink := newFakeSink()
	sink.fail = 1
	if err := startRun(a, sink).wait(t); err == nil || !strings.Contains(err.Error(), "kernel refused") {
		t.Fatalf("Run = %v, want the deliver error", err)
	}
	if seen(t, peer, "m1@example.test") {
		t.Fatal("failed mail flagged \\Seen")
	}
	sink.next(t)
	r := startRun(a, sink)
	defer r.stop(t)
	if m := sink.next(t); m.MessageID != "m1@example.test" {
		t.Fatalf("redelivered %+v", m)
	}
	eventually(t, "seen after redelivery", func() bool { return seen(t, peer, "m1@example.test") })
}

// TestEmailSendFailures: a refusal at the end of DATA is plain, a
// server that never answers it is Ambiguous, a closed port is plain;
// edits and bad addresses are refused before anything is sent.
func TestEmailSendFailures(t *testing.T) {
	ms := startMailServers(t)
	a := newTestEmail(t, ms, map[string]string{"timeout": "2"})
	to := abi.AdapterSurface{Kind: "dm", ID: "ada@example.test"}
	for _, tc := range []struct {
		mode      string
		out       Outbound
		ambiguous bool
	}{
		{"refuse", Outbound{Surface: to, Text: "x"}, false},
		{"stall", Outbound{Surface: to, Text: "x"}, true},
		{"", Outbound{Surface: to, Text: "x", Edit: "m1@example.test"}, false},
		{"", Outbound{Surface: abi.AdapterSurface{ID: "not an address"}, Text: "x"}, false},
		{"", Outbound{Surface: to, Text: strings.Repeat("x", emailMaxText+1)}, false},
	} {
		ms.mu.Lock()
		ms.mode = tc.mode
		ms.mu.Unlock()
		_, err := a.Send(context.Background(), tc.out)
		if err == nil || IsAmbiguous(err) != tc.ambiguous {
			t.Errorf("%s: Send = %v, want ambiguous %v", tc.mode, err, tc.ambiguous)
		}
	}
	closed := newTestEmail(t, ms, map[string]string{"smtp": closedAddr(t)})
	if _, err := closed.Send(context.Background(), Outbound{Surface: to, Text: "x"}); err == nil || IsAmbiguous(err) {
		t.Errorf("closed port: Send = %v, want a plain error", err)
	}
}

func closedAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestEmailRunFails: an IMAP server that answers garbage, stalls, or
// refuses the login makes Run return an error without hanging.
func TestEmailRunFails(t *testing.T) {
	ms := startMailServers(t)
	for _, mode := range []string{"garbage", "stall", "badlogin", "closed"} {
		t.Run(mode, func(t *testing.T) {
			addr, secret := ms.imapAddr, botPass
			switch mode {
			case "garbage", "stall":
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				defer l.Close()
				go func() {
					for {
						c, err := l.Accept()
						if err != nil {
							return
						}
						defer c.Close()
						if mode == "garbage" {
							io.WriteString(c, "\x00\x01 HTTP/1.1 200 OK\r\n\r\n<<<>>>\r\n")
						}
					}
				}()
				addr = l.Addr().String()
			case "badlogin":
				secret = "wrong"
			case "closed":
				addr = closedAddr(t)
			}
			a, err := New("email", Config{Account: "mail", Secret: secret, Options: map[string]string{
				"imap": addr, "smtp": ms.smtpAddr, "from": botAddr, "security": "insecure", "timeout": "2"}})
			if err != nil {
				t.Fatal(err)
			}
			sink := newFakeSink()
			if err := startRun(a, sink).wait(t); err == nil {
				t.Fatal("Run = nil, want an error")
			}
		})
	}
}

func TestEmailConfig(t *testing.T) {
	ok := map[string]string{"imap": "h:993", "smtp": "h:465", "from": "a@b.c"}
	for name, mod := range map[string]map[string]string{
		"no imap":      {"imap": ""},
		"bad from":     {"from": "nope"},
		"bad security": {"security": "maybe"},
		"unknown":      {"colour": "red"},
	} {
		o := map[string]string{}
		for k, v := range ok {
			o[k] = v
		}
		for k, v := range mod {
			o[k] = v
		}
		if _, err := New("email", Config{Account: "a", Options: o}); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// FuzzEmailParse: any bytes parse without panicking; the text is
// trimmed and media carry a MIME type.
func FuzzEmailParse(f *testing.F) {
	f.Add([]byte(strings.ReplaceAll(adaMail, "\n", "\r\n")))
	f.Add([]byte("From: a@b\r\nContent-Type: text/html\r\n\r\n<p>hi<br>there &amp; <script>x</script></p>"))
	f.Add([]byte("Subject: =?utf-8?q?caf=C3=A9?=\r\nContent-Type: multipart/alternative; boundary=b\r\n\r\n--b\r\n\r\n> q\r\n--b"))
	f.Add([]byte("no headers at all"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, _ := emailParse(raw, 1<<10)
		if m.Text != strings.TrimSpace(m.Text) {
			t.Fatalf("text not trimmed: %q", m.Text)
		}
		if m.Surface.Kind != "dm" {
			t.Fatalf("surface %+v", m.Surface)
		}
		for _, md := range m.Media {
			if md.MimeType == "" || md.Size > 1<<10 {
				t.Fatalf("media %+v", md)
			}
		}
		fitInbound(&m.AdapterMessage)
		if _, err := abi.CheckMedia(m.Media); err != nil || !utf8.ValidString(m.Text) {
			t.Fatalf("fitted media refused: %v (%+v)", err, m.Media)
		}
	})
}
