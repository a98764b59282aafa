package main_test

// The email bridge end to end: a real daemon, gsvfs adapter email as a
// subprocess, and real protocol servers started by the test on free
// loopback ports: go-imap's IMAP server (its in-memory backend) that
// the bridge idles on, and a go-smtp server that receives its replies.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// e2eMail is the bot's mailbox (IMAP) and its outgoing server (SMTP).
type e2eMail struct {
	imapAddr, smtpAddr string
	mu                 sync.Mutex // guards got
	got                [][]byte
}

func startE2EMail(t *testing.T, user, pass string) *e2eMail {
	t.Helper()
	m := &e2eMail{}
	mem := imapmemserver.New()
	u := imapmemserver.NewUser(user, pass)
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
		Logger:       quietLog{},
	})
	il, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go is.Serve(il)
	ss := smtp.NewServer(smtp.BackendFunc(func(*smtp.Conn) (smtp.Session, error) {
		return &e2eSMTP{m: m, user: user, pass: pass}, nil
	}))
	ss.Domain, ss.AllowInsecureAuth, ss.ErrorLog = "gsv.test", true, quietLog{}
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go ss.Serve(sl)
	t.Cleanup(func() { is.Close(); ss.Close() })
	m.imapAddr, m.smtpAddr = il.Addr().String(), sl.Addr().String()
	return m
}

type quietLog struct{}

func (quietLog) Printf(string, ...any) {}
func (quietLog) Println(...any)        {}

type e2eSMTP struct {
	m          *e2eMail
	user, pass string
}

func (s *e2eSMTP) AuthMechanisms() []string { return []string{sasl.Plain} }
func (s *e2eSMTP) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, u, p string) error {
		if u != s.user || p != s.pass {
			return errors.New("bad credentials")
		}
		return nil
	}), nil
}
func (s *e2eSMTP) Reset()                               {}
func (s *e2eSMTP) Logout() error                        { return nil }
func (s *e2eSMTP) Mail(string, *smtp.MailOptions) error { return nil }
func (s *e2eSMTP) Rcpt(string, *smtp.RcptOptions) error { return nil }
func (s *e2eSMTP) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	s.m.mu.Lock()
	s.m.got = append(s.m.got, b)
	s.m.mu.Unlock()
	return err
}

// deliverMail puts a mail from ada into the bot's INBOX, as a mail
// server's delivery would.
func (m *e2eMail) deliverMail(t *testing.T, user, pass, id, body string) {
	t.Helper()
	c, err := imapclient.DialInsecure(m.imapAddr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Login(user, pass).Wait(); err != nil {
		t.Fatal(err)
	}
	raw := strings.ReplaceAll(fmt.Sprintf("From: Ada <ada@example.test>\nTo: %s\nSubject: hello\nMessage-ID: <%s>\nDate: %s\n\n%s\n",
		user, id, time.Now().Format(time.RFC1123Z), body), "\n", "\r\n")
	cmd := c.Append("INBOX", int64(len(raw)), nil)
	io.WriteString(cmd, raw)
	cmd.Close()
	if _, err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
}

// wait waits for a mail the SMTP server received holding want, and
// returns it parsed.
func (m *e2eMail) wait(t *testing.T, want string) (mail.Header, string) {
	t.Helper()
	var h mail.Header
	var text string
	waitFor(t, 60*time.Second, "a mail holding "+want, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		for _, raw := range m.got {
			r, err := mail.CreateReader(bytes.NewReader(raw))
			if err != nil {
				continue
			}
			p, err := r.NextPart()
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(p.Body)
			if strings.Contains(string(b), want) {
				h, text = r.Header, string(b)
				return true
			}
		}
		return false
	})
	return h, text
}

// TestE2EAdapterEmail: a mail from a stranger gets a link code by mail;
// once linked, a mail reaches alice's agent and its answer comes back as
// a threaded reply.
func TestE2EAdapterEmail(t *testing.T) {
	s := newAdapterSetup(t, newBase(t), "email")
	const bot, pass = "bot@gsv.test", "s3cret" // the setup's secret file holds s3cret
	m := startE2EMail(t, bot, pass)
	startBridge(t, "email", "--kernel", s.listen, "--token", s.token, "--bot-token-file", s.secret, "--account", "mail",
		"--opt", "imap="+m.imapAddr, "--opt", "smtp="+m.smtpAddr, "--opt", "from=Gsv <"+bot+">", "--opt", "security=insecure")

	m.deliverMail(t, bot, pass, "m1@example.test", "hi")
	_, text := m.wait(t, "gsv link")
	code := linkCode.FindStringSubmatch(text)
	if code == nil {
		t.Fatalf("no link code in %q", text)
	}
	if r := gsvAs(aliceHost, s.env, "link", code[1]); r.code != 0 {
		t.Fatalf("gsv link: %v", r)
	}
	m.deliverMail(t, bot, pass, "m2@example.test", "hello by mail\n\nOn Mon, someone wrote:\n> old")
	h, _ := m.wait(t, "You said: hello by mail")
	subj, _ := h.Subject()
	if h.Get("In-Reply-To") != "<m2@example.test>" || !strings.Contains(h.Get("References"), "<m2@example.test>") || subj != "Re: hello" {
		t.Errorf("the reply's headers: in-reply-to %q references %q subject %q", h.Get("In-Reply-To"), h.Get("References"), subj)
	}
	if st := s.accountStatus(t, "email", "mail"); st == nil || st["connected"] != true {
		t.Errorf("account status %v", st)
	}
}
