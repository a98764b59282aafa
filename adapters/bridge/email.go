package bridge

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/emersion/go-message"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"gsvfs.dev/gsvfs/abi"
)

// The email kind: IMAP IDLE in (github.com/emersion/go-imap/v2's
// client), SMTP out (github.com/emersion/go-smtp). Each unseen mail in
// the mailbox is delivered, then flagged \Seen; a surface is the
// sender's address, a dm. Replies are threaded (In-Reply-To,
// References, "Re: " subject).

func init() { Register("email", newEmail) }

const (
	emailMaxText   = 1 << 20
	emailMaxRaw    = 64 << 20 // a mail larger than this is not fetched whole
	emailThreadCap = 1000     // threads remembered for replies
)

type email struct {
	cfg                   Config
	imapAddr, smtpAddr    string
	user, from, mbox, sec string
	idle                  time.Duration
	timeout               time.Duration
	maxMedia              int64
	tlsConf               *tls.Config

	mu      sync.Mutex // guards threads, order
	threads map[string]emailThread
	order   []string
}

// emailThread is what a reply to a message needs: its subject and its
// References chain.
type emailThread struct {
	subject string
	refs    []string
}

func newEmail(cfg Config) (Adapter, error) {
	o := cfg.Options
	if err := checkOptions("email", o, "imap", "smtp", "user", "from", "mailbox", "security", "idle_timeout", "timeout", "max_media", "insecure_skip_verify"); err != nil {
		return nil, err
	}
	e := &email{cfg: cfg, imapAddr: o["imap"], smtpAddr: o["smtp"], user: o["user"], from: o["from"],
		mbox: orDefault(o["mailbox"], "INBOX"), sec: orDefault(o["security"], "tls"), threads: map[string]emailThread{}}
	if cfg.BaseURL != "" {
		return nil, errors.New("email: no --base-url; use --opt imap=HOST:PORT and --opt smtp=HOST:PORT")
	}
	if e.imapAddr == "" || e.smtpAddr == "" || e.from == "" {
		return nil, errors.New("email: options imap=HOST:PORT, smtp=HOST:PORT and from=ADDRESS are required")
	}
	fa, err := mail.ParseAddress(e.from)
	if err != nil {
		return nil, fmt.Errorf("email: from=%q: %v", e.from, err)
	}
	if e.user == "" {
		e.user = fa.Address
	}
	switch e.sec {
	case "tls", "starttls", "insecure":
	default:
		return nil, fmt.Errorf("email: security=%q: want tls, starttls or insecure", e.sec)
	}
	if e.idle, err = optSeconds("email", o, "idle_timeout", 5*time.Minute); err != nil {
		return nil, err
	}
	if e.timeout, err = optSeconds("email", o, "timeout", 60*time.Second); err != nil {
		return nil, err
	}
	if e.maxMedia, err = optInt("email", o, "max_media", defaultMaxMedia); err != nil {
		return nil, err
	}
	e.tlsConf = &tls.Config{InsecureSkipVerify: o["insecure_skip_verify"] == "true"}
	return e, nil
}

func (e *email) Kind() string { return "email" }

func (e *email) Limits() Limits {
	return Limits{MaxText: emailMaxText, CanEdit: false, MaxMedia: e.maxMedia}
}

// Run logs in to IMAP, delivers every unseen mail, and waits in IDLE for
// more, until ctx ends or the connection fails.
func (e *email) Run(ctx context.Context, sink Sink) error {
	err := e.run(ctx, sink)
	if ctx.Err() != nil {
		return nil
	}
	sink.State(stateErr(e.cfg.Account, err))
	return err
}

func (e *email) run(ctx context.Context, sink Sink) error {
	wake := make(chan struct{}, 1)
	opts := &imapclient.Options{
		TLSConfig: e.tlsConf,
		Dialer:    &net.Dialer{Timeout: e.timeout},
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(d *imapclient.UnilateralDataMailbox) {
				if d.NumMessages != nil {
					select {
					case wake <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	var c *imapclient.Client
	var err error
	switch e.sec {
	case "tls":
		c, err = imapclient.DialTLS(e.imapAddr, opts)
	case "starttls":
		c, err = imapclient.DialStartTLS(e.imapAddr, opts)
	default:
		c, err = imapclient.DialInsecure(e.imapAddr, opts)
	}
	if err != nil {
		return fmt.Errorf("email: imap dial: %w", err)
	}
	defer c.Close()
	// Every step is bounded: a stalled server closes the connection.
	stop := make(chan struct{})
	defer close(stop)
	step := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(e.timeout)
		t := time.NewTimer(e.timeout)
		defer t.Stop()
		done := ctx.Done()
		for {
			select {
			case <-stop:
				return
			case <-done:
				c.Close()
				done = nil
			case d := <-step:
				deadline = d
				t.Reset(time.Until(d))
			case <-t.C:
				if time.Now().After(deadline) {
					c.Close()
				}
			}
		}
	}()
	arm := func(d time.Duration) { step <- time.Now().Add(d) }

	if err := c.WaitGreeting(); err != nil {
		return fmt.Errorf("email: imap greeting: %w", err)
	}
	if err := c.Login(e.user, e.cfg.Secret).Wait(); err != nil {
		return fmt.Errorf("email: imap login: %w", err)
	}
	if _, err := c.Select(e.mbox, nil).Wait(); err != nil {
		return fmt.Errorf("email: select %s: %w", e.mbox, err)
	}
	sink.State(abi.AdapterAccountStatus{AccountID: e.cfg.Account, Connected: true, Authenticated: true, Mode: "idle",
		Extra: map[string]string{"address": e.from, "imap": e.imapAddr, "smtp": e.smtpAddr}})
	for {
		arm(e.timeout)
		if err := e.deliverUnseen(ctx, c, sink, arm); err != nil {
			return err
		}
		arm(e.idle + e.timeout)
		idle, err := c.Idle()
		if err != nil {
			return fmt.Errorf("email: idle: %w", err)
		}
		t := time.NewTimer(e.idle)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		case <-c.Closed():
		}
		t.Stop()
		arm(e.timeout)
		if err := idle.Close(); err != nil {
			return fmt.Errorf("email: idle: %w", err)
		}
		if err := idle.Wait(); err != nil {
			return fmt.Errorf("email: idle: %w", err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// deliverUnseen delivers each unseen mail, oldest first, flagging it
// \Seen once Deliver returned nil.
func (e *email) deliverUnseen(ctx context.Context, c *imapclient.Client, sink Sink, arm func(time.Duration)) error {
	sd, err := c.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}, nil).Wait()
	if err != nil {
		return fmt.Errorf("email: search: %w", err)
	}
	for _, uid := range sd.AllUIDs() {
		arm(e.timeout)
		sec := &imap.FetchItemBodySection{Peek: true}
		bufs, err := c.Fetch(imap.UIDSetNum(uid), &imap.FetchOptions{UID: true, RFC822Size: true, InternalDate: true,
			BodySection: []*imap.FetchItemBodySection{sec}}).Collect()
		if err != nil {
			return fmt.Errorf("email: fetch %d: %w", uid, err)
		}
		if len(bufs) == 0 {
			continue // expunged meanwhile
		}
		raw := bufs[0].FindBodySection(sec)
		m, err := emailParse(raw, e.maxMedia)
		if err != nil {
			slog.Warn("email: unreadable mail delivered as text", "account", e.cfg.Account, "uid", uid, "err", err)
		}
		if m.MessageID == "" {
			m.MessageID = fmt.Sprintf("imap:%s:%d", e.mbox, uid)
		}
		if m.Timestamp == 0 {
			m.Timestamp = bufs[0].InternalDate.UnixMilli()
		}
		own := m.Actor != nil && strings.EqualFold(m.Actor.ID, e.fromAddr())
		if !own {
			e.remember(m.MessageID, m.subject, append(m.refs, "<"+m.MessageID+">"))
			arm(e.timeout + 10*time.Minute) // the kernel's claim
			fitInbound(&m.AdapterMessage)
			if err := sink.Deliver(ctx, m.AdapterMessage); !Settled(err) {
				return fmt.Errorf("email: deliver %s: %w", m.MessageID, err)
			}
			arm(e.timeout)
		}
		if err := c.Store(imap.UIDSetNum(uid), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true,
			Flags: []imap.Flag{imap.FlagSeen}}, nil).Close(); err != nil {
			return fmt.Errorf("email: flag %d seen: %w", uid, err)
		}
	}
	return nil
}

func (e *email) fromAddr() string {
	a, err := mail.ParseAddress(e.from)
	if err != nil {
		return e.from
	}
	return a.Address
}

func (e *email) remember(id, subject string, refs []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.threads[id]; !ok {
		e.order = append(e.order, id)
	}
	e.threads[id] = emailThread{subject: subject, refs: refs}
	for len(e.order) > emailThreadCap {
		delete(e.threads, e.order[0])
		e.order = e.order[1:]
	}
}

// emailMessage is a parsed mail: the AdapterMessage and what a reply
// to it needs.
type emailMessage struct {
	abi.AdapterMessage
	subject string
	refs    []string
}

// emailParse maps a raw RFC 5322 mail to an AdapterMessage: the sender
// is the actor and the dm surface, the text is the plain body (or the
// HTML body as text) without the quoted history, attachments are media
// (one over maxMedia is named in the text). A mail it cannot read is
// returned with what was read and an error.
func emailParse(raw []byte, maxMedia int64) (emailMessage, error) {
	var m emailMessage
	m.Surface.Kind = "dm"
	m.WasMentioned = true
	mr, err := mail.CreateReader(bytes.NewReader(raw))
	if err != nil && mr == nil {
		m.Text = emailStripQuote(string(raw[:min(len(raw), emailMaxText)]))
		return m, err
	}
	h := mr.Header
	if from, _ := h.AddressList("From"); len(from) > 0 {
		m.Actor = &abi.AdapterActor{ID: strings.ToLower(from[0].Address), Name: from[0].Name, Handle: from[0].Address}
		m.Surface.ID, m.Surface.Name = m.Actor.ID, from[0].Name
	}
	m.subject, _ = h.Subject()
	m.MessageID, _ = h.MessageID()
	if irt, _ := h.MsgIDList("In-Reply-To"); len(irt) > 0 {
		m.ReplyToID = irt[0]
	}
	if refs, _ := h.MsgIDList("References"); len(refs) > 0 {
		for _, r := range refs {
			m.refs = append(m.refs, "<"+r+">")
		}
	}
	if d, err := h.Date(); err == nil && !d.IsZero() {
		m.Timestamp = d.UnixMilli()
	}
	var plain, htm string
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil && !message.IsUnknownCharset(err) {
			m.Text = strings.TrimSpace(emailStripQuote(plain+htm) + m.Text)
			return m, err
		}
		switch ph := p.Header.(type) {
		case *mail.InlineHeader:
			t, _, _ := ph.ContentType()
			b, _ := io.ReadAll(io.LimitReader(p.Body, emailMaxText))
			switch {
			case t == "text/plain" || t == "":
				plain += string(b)
			case t == "text/html":
				htm += emailHTMLText(string(b))
			default:
				m.addMedia(b, t, "inline", maxMedia)
			}
		case *mail.AttachmentHeader:
			t, _, _ := ph.ContentType()
			name, _ := ph.Filename()
			b, _ := io.ReadAll(io.LimitReader(p.Body, maxMedia+1))
			m.addMedia(b, t, orDefault(name, "attachment"), maxMedia)
		}
	}
	text := plain
	if strings.TrimSpace(text) == "" {
		text = htm
	}
	m.Text = strings.TrimSpace(emailStripQuote(text) + m.Text)
	return m, nil
}

func (m *emailMessage) addMedia(b []byte, mimeType, name string, max int64) {
	if int64(len(b)) > max {
		m.Text += skippedNote(name, int64(len(b)), max)
		return
	}
	m.Media = append(m.Media, newMedia(b, mimeType, name))
}

var (
	emailTag     = regexp.MustCompile(`(?s)<(script|style)[^>]*>.*?</(script|style)>|<[^>]*>`)
	emailBlock   = regexp.MustCompile(`(?i)<(br|/p|/div|/li|/tr|/h[1-6])[^>]*>`)
	emailAttrib  = regexp.MustCompile(`(?m)^On .{1,200} wrote:\s*$`)
	emailBlanks  = regexp.MustCompile(`\n{3,}`)
	emailOrigMsg = regexp.MustCompile(`(?m)^-{2,} ?Original Message ?-{2,}\s*$`)
)

// emailHTMLText is an HTML body's text: tags dropped, line breaks kept,
// entities decoded.
func emailHTMLText(s string) string {
	s = emailBlock.ReplaceAllString(s, "\n$0")
	s = emailTag.ReplaceAllString(s, "")
	return html.UnescapeString(s)
}

// emailStripQuote drops the quoted history a mail client puts under a
// reply (from an "On ... wrote:" line, an "Original Message" line, or
// the first run of "> " lines that ends the text) and trims the rest.
func emailStripQuote(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if loc := emailAttrib.FindStringIndex(s); loc != nil {
		s = s[:loc[0]]
	}
	if loc := emailOrigMsg.FindStringIndex(s); loc != nil {
		s = s[:loc[0]]
	}
	lines := strings.Split(s, "\n")
	end := len(lines)
	for end > 0 && (strings.HasPrefix(lines[end-1], ">") || strings.TrimSpace(lines[end-1]) == "") {
		end--
	}
	s = strings.Join(lines[:end], "\n")
	return strings.TrimSpace(emailBlanks.ReplaceAllString(s, "\n\n"))
}

// Send mails out's text and media to the surface's address, as a
// threaded reply when ReplyToID names a mail; the id it returns is the
// mail's Message-ID.
func (e *email) Send(ctx context.Context, out Outbound) (Sent, error) {
	if err := checkOutbound("email", out, e.Limits()); err != nil {
		return Sent{}, err
	}
	if out.Edit != "" {
		return Sent{}, refuse("email", "mail cannot be edited")
	}
	to, err := mail.ParseAddress(out.Surface.ID)
	if err != nil {
		return Sent{}, refuse("email", "bad address %q: %v", out.Surface.ID, err)
	}
	from, _ := mail.ParseAddress(e.from)
	raw, id, err := e.compose(from, to, out)
	if err != nil {
		return Sent{}, err
	}
	if err := e.submit(ctx, from.Address, to.Address, raw); err != nil {
		return Sent{}, err
	}
	return Sent{MessageID: id}, nil
}

// compose writes the mail and returns it with its Message-ID.
func (e *email) compose(from, to *mail.Address, out Outbound) ([]byte, string, error) {
	var h mail.Header
	h.SetDate(time.Now())
	h.SetAddressList("From", []*mail.Address{from})
	h.SetAddressList("To", []*mail.Address{to})
	var rb [12]byte
	rand.Read(rb[:])
	domain := from.Address[strings.LastIndexByte(from.Address, '@')+1:]
	id := hex.EncodeToString(rb[:]) + "@" + domain
	h.SetMessageID(id)
	subject := "Message from " + orDefault(from.Name, from.Address)
	if out.ReplyToID != "" {
		rid := strings.Trim(out.ReplyToID, "<>")
		e.mu.Lock()
		th, ok := e.threads[rid]
		e.mu.Unlock()
		refs := th.refs
		if !ok {
			refs = []string{"<" + rid + ">"}
		}
		if ok && th.subject != "" {
			subject = th.subject
			if !strings.HasPrefix(strings.ToLower(subject), "re:") {
				subject = "Re: " + subject
			}
		} else {
			subject = "Re: " + subject
		}
		h.Set("In-Reply-To", "<"+rid+">")
		h.Set("References", strings.Join(refs, " "))
	}
	h.SetSubject(subject)
	var buf bytes.Buffer
	w, err := mail.CreateWriter(&buf, h)
	if err != nil {
		return nil, "", err
	}
	var ih mail.InlineHeader
	ih.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	tw, err := w.CreateSingleInline(ih)
	if err != nil {
		return nil, "", err
	}
	io.WriteString(tw, out.Text)
	tw.Close()
	for _, md := range out.Media {
		data, _ := mediaBytes(md, e.maxMedia) // checked by Send
		var ah mail.AttachmentHeader
		ah.SetContentType(md.MimeType, nil)
		ah.SetFilename(mediaFilename(md))
		aw, err := w.CreateAttachment(ah)
		if err != nil {
			return nil, "", err
		}
		aw.Write(data)
		aw.Close()
	}
	if err := w.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), id, nil
}

// submit hands raw to the SMTP server. A failure before the end of DATA
// leaves nothing sent; a lost connection or timeout at its end is
// Ambiguous; a refusal is plain.
func (e *email) submit(ctx context.Context, from, to string, raw []byte) error {
	d := net.Dialer{Timeout: e.timeout}
	conn, err := d.DialContext(ctx, "tcp", e.smtpAddr)
	if err != nil {
		return fmt.Errorf("email: smtp dial: %w", err)
	}
	// A cancelled ctx ends the exchange; each command and the mail's
	// submission are bounded by the timeout option.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	host, _, _ := net.SplitHostPort(e.smtpAddr)
	tc := e.tlsConf.Clone()
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	var c *smtp.Client
	switch e.sec {
	case "tls":
		c = smtp.NewClient(tls.Client(conn, tc))
	case "starttls":
		guard := time.AfterFunc(e.timeout, func() { conn.Close() })
		c, err = smtp.NewClientStartTLS(conn, tc)
		guard.Stop()
		if err != nil {
			conn.Close()
			return fmt.Errorf("email: smtp starttls: %w", err)
		}
	default:
		c = smtp.NewClient(conn)
	}
	c.CommandTimeout, c.SubmissionTimeout = e.timeout, e.timeout
	defer c.Close()
	if e.cfg.Secret != "" {
		if ok, _ := c.Extension("AUTH"); ok {
			if err := c.Auth(sasl.NewPlainClient("", e.user, e.cfg.Secret)); err != nil {
				return fmt.Errorf("email: smtp auth: %w", err)
			}
		}
	}
	if err := c.Mail(from, nil); err != nil {
		return fmt.Errorf("email: smtp MAIL: %w", err)
	}
	if err := c.Rcpt(to, nil); err != nil {
		return fmt.Errorf("email: smtp RCPT: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("email: smtp DATA: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return fmt.Errorf("email: smtp DATA: %w", err) // unterminated: the server drops it
	}
	if err := w.Close(); err != nil {
		var se *smtp.SMTPError
		if errors.As(err, &se) {
			return fmt.Errorf("email: smtp refused the mail: %w", err)
		}
		return Ambiguous(fmt.Errorf("email: smtp end of DATA: %w", err))
	}
	c.Quit()
	return nil
}
