package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bwmarrin/discordgo"
	"github.com/gorilla/websocket"

	"gsvfs.dev/gsvfs/abi"
)

// The Discord kind: github.com/bwmarrin/discordgo, the gateway
// WebSocket in (MESSAGE_CREATE), the REST API out. The gateway has no
// acknowledgement and replays nothing to a new session, so a message
// whose Deliver failed is remembered (per channel, the oldest) and the
// next Run fetches that channel's messages from it on (GET
// /channels/{id}/messages?after=) and delivers them again.

func init() { Register("discord", newDiscord) }

const discordMaxText = 2000

var (
	discordEndpointsMu sync.Mutex // guards discordBase and discordgo's Endpoint variables
	discordBase        string
)

// discordSetBase points discordgo's package-level endpoints at base:
// they are process-wide, so one process talks to one Discord.
func discordSetBase(base string) {
	discordEndpointsMu.Lock()
	defer discordEndpointsMu.Unlock()
	if base == discordBase {
		return
	}
	discordBase = base
	d := discordgo.EndpointDiscord
	if base != "" {
		d = strings.TrimRight(base, "/") + "/"
	}
	discordgo.EndpointDiscord = d
	discordgo.EndpointAPI = d + "api/v" + discordgo.APIVersion + "/"
	discordgo.EndpointGuilds = discordgo.EndpointAPI + "guilds/"
	discordgo.EndpointChannels = discordgo.EndpointAPI + "channels/"
	discordgo.EndpointUsers = discordgo.EndpointAPI + "users/"
	discordgo.EndpointGateway = discordgo.EndpointAPI + "gateway"
	discordgo.EndpointGatewayBot = discordgo.EndpointGateway + "/bot"
	discordgo.EndpointWebhooks = discordgo.EndpointAPI + "webhooks/"
}

type discord struct {
	cfg      Config
	token    string
	hc       *http.Client
	timeout  time.Duration
	maxMedia int64

	mu     sync.Mutex        // guards replay
	replay map[string]string // channel -> oldest message id not delivered
}

func newDiscord(cfg Config) (Adapter, error) {
	if err := checkOptions("discord", cfg.Options, "timeout", "max_media"); err != nil {
		return nil, err
	}
	tok := strings.TrimSpace(cfg.Secret)
	if tok == "" || strings.ContainsAny(tok, " \n") {
		return nil, errors.New("discord: the bot token (--bot-token-file) is empty or malformed")
	}
	timeout, err := optSeconds("discord", cfg.Options, "timeout", 30*time.Second)
	if err != nil {
		return nil, err
	}
	maxMedia, err := optInt("discord", cfg.Options, "max_media", 10<<20)
	if err != nil {
		return nil, err
	}
	if cfg.BaseURL != "" {
		discordSetBase(cfg.BaseURL)
	}
	return &discord{cfg: cfg, token: tok, hc: newHTTPClient(60 * time.Second), timeout: timeout, maxMedia: maxMedia,
		replay: map[string]string{}}, nil
}

func (d *discord) Kind() string { return "discord" }

func (d *discord) Limits() Limits {
	return Limits{MaxText: discordMaxText, CanEdit: true, MaxMedia: d.maxMedia}
}

func (d *discord) session() (*discordgo.Session, error) {
	s, err := discordgo.New("Bot " + d.token)
	if err != nil {
		return nil, err
	}
	s.Client = d.hc
	s.ShouldReconnectOnError = false // the bridge reconnects, with backoff
	s.ShouldRetryOnRateLimit = false
	s.SyncEvents = true // handlers run in order, on the reading goroutine
	s.StateEnabled = true
	s.LogLevel = -1
	s.Identify.Intents = discordgo.IntentsGuildMessages | discordgo.IntentsDirectMessages | discordgo.IntentsMessageContent
	return s, nil
}

// Run holds one gateway session until ctx ends or it fails.
func (d *discord) Run(ctx context.Context, sink Sink) error {
	err := d.run(ctx, sink)
	if ctx.Err() != nil {
		return nil
	}
	sink.State(stateErr(d.cfg.Account, err))
	return err
}

func (d *discord) run(ctx context.Context, sink Sink) error {
	s, err := d.session()
	if err != nil {
		return fmt.Errorf("discord: %w", err)
	}
	// Open reads the gateway's hello and ready without a deadline while
	// holding the session's lock: a watchdog closes the raw connection.
	var connMu sync.Mutex // guards conn
	var conn net.Conn
	nd := &net.Dialer{Timeout: d.timeout}
	s.Dialer = &websocket.Dialer{HandshakeTimeout: d.timeout, NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := nd.DialContext(ctx, network, addr)
		connMu.Lock()
		conn = c
		connMu.Unlock()
		return c, err
	}}
	failed := make(chan error, 1)
	fail := func(err error) {
		select {
		case failed <- err:
		default:
		}
	}
	var me atomic.Pointer[discordgo.User] // set by READY, read by the handlers and Run
	var broken bool                       // touched only by the handlers (SyncEvents: one goroutine) // a Deliver failed: later messages wait for the replay
	s.AddHandler(func(_ *discordgo.Session, r *discordgo.Ready) { me.Store(r.User) })
	s.AddHandler(func(_ *discordgo.Session, _ *discordgo.Disconnect) {
		fail(errors.New("discord: gateway connection lost"))
	})
	s.AddHandler(func(_ *discordgo.Session, m *discordgo.MessageCreate) {
		if broken || m.Message == nil {
			if m.Message != nil {
				d.markReplay(m.ChannelID, m.ID)
			}
			return
		}
		if err := d.deliver(ctx, s, sink, me.Load(), m.Message); err != nil {
			broken = true
			fail(err)
		}
	})
	opened := make(chan error, 1)
	go func() { opened <- s.Open() }()
	select {
	case err = <-opened:
	case <-time.After(d.timeout):
		connMu.Lock()
		if conn != nil {
			conn.Close()
		}
		connMu.Unlock()
		<-opened
		err = errors.New("no hello or ready from the gateway")
	case <-ctx.Done():
		connMu.Lock()
		if conn != nil {
			conn.Close()
		}
		connMu.Unlock()
		<-opened
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("discord: gateway: %w", err)
	}
	defer s.Close()
	name := ""
	if u := me.Load(); u != nil {
		name = u.Username
	}
	sink.State(abi.AdapterAccountStatus{AccountID: d.cfg.Account, Connected: true, Authenticated: true, Mode: "gateway",
		Extra: map[string]string{"bot": name}})
	if err := d.replayMissed(ctx, s, sink, me.Load()); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-failed:
		return err
	}
}

func (d *discord) markReplay(channel, id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if old, ok := d.replay[channel]; !ok || snowflakeLess(id, old) {
		d.replay[channel] = id
	}
}

func snowflakeLess(a, b string) bool {
	x, _ := strconv.ParseUint(a, 10, 64)
	y, _ := strconv.ParseUint(b, 10, 64)
	return x < y
}

// replayMissed fetches and delivers, per channel, the messages from the
// oldest one not delivered on.
func (d *discord) replayMissed(ctx context.Context, s *discordgo.Session, sink Sink, me *discordgo.User) error {
	d.mu.Lock()
	todo := make(map[string]string, len(d.replay))
	for c, id := range d.replay {
		todo[c] = id
	}
	d.mu.Unlock()
	for c, id := range todo {
		n, _ := strconv.ParseUint(id, 10, 64)
		msgs, err := s.ChannelMessages(c, 100, "", strconv.FormatUint(n-1, 10), "", discordgo.WithContext(ctx))
		if err != nil {
			return fmt.Errorf("discord: fetch missed messages: %w", err)
		}
		sort.Slice(msgs, func(i, j int) bool { return snowflakeLess(msgs[i].ID, msgs[j].ID) })
		for _, m := range msgs {
			if m.ChannelID == "" {
				m.ChannelID = c
			}
			if err := d.deliver(ctx, s, sink, me, m); err != nil {
				return err
			}
		}
		d.mu.Lock()
		if d.replay[c] == id {
			delete(d.replay, c)
		}
		d.mu.Unlock()
	}
	return nil
}

// deliver maps and delivers m; on failure m is marked for replay.
func (d *discord) deliver(ctx context.Context, s *discordgo.Session, sink Sink, me *discordgo.User, m *discordgo.Message) error {
	var thread bool
	if s.State != nil {
		if ch, err := s.State.Channel(m.ChannelID); err == nil && ch.IsThread() {
			thread = true
		}
	}
	in, files, ok := discordMessage(me, m, thread)
	if !ok {
		return nil
	}
	for _, a := range files {
		if int64(a.Size) > d.maxMedia {
			in.Text += skippedNote(a.Filename, int64(a.Size), d.maxMedia)
			continue
		}
		data, ctype, err := download(ctx, d.hc, a.URL, nil, d.maxMedia)
		if errors.Is(err, errTooLarge) {
			in.Text += skippedNote(a.Filename, int64(a.Size), d.maxMedia)
			continue
		}
		if err != nil {
			d.markReplay(m.ChannelID, m.ID)
			return fmt.Errorf("discord: download %s: %w", a.Filename, err)
		}
		in.Media = append(in.Media, newMedia(data, orDefault(a.ContentType, ctype), a.Filename))
	}
	fitInbound(&in)
	if err := sink.Deliver(ctx, in); !Settled(err) {
		d.markReplay(m.ChannelID, m.ID)
		return fmt.Errorf("discord: deliver %s: %w", in.MessageID, err)
	}
	return nil
}

// discordMessage maps a Discord message for the bot me (id
// "<channel>:<message>"); ok is false for the bot's own and other bots'
// messages.
func discordMessage(me *discordgo.User, m *discordgo.Message, thread bool) (in abi.AdapterMessage, files []*discordgo.MessageAttachment, ok bool) {
	if m == nil || m.Author == nil || m.Author.Bot || m.ID == "" || m.ChannelID == "" || (me != nil && m.Author.ID == me.ID) {
		return in, nil, false
	}
	in = abi.AdapterMessage{MessageID: m.ChannelID + ":" + m.ID, Text: m.Content,
		Surface: abi.AdapterSurface{ID: m.ChannelID, Kind: "channel"},
		Actor:   &abi.AdapterActor{ID: m.Author.ID, Name: orDefault(m.Author.GlobalName, m.Author.Username), Handle: m.Author.Username}}
	if !m.Timestamp.IsZero() {
		in.Timestamp = m.Timestamp.UnixMilli()
	}
	switch {
	case m.GuildID == "":
		in.Surface.Kind = "dm"
		in.WasMentioned = true
	case thread:
		in.Surface.Kind = "thread"
		in.Surface.ThreadID = m.ChannelID
	}
	if r := m.MessageReference; r != nil && r.MessageID != "" {
		in.ReplyToID = orDefault(r.ChannelID, m.ChannelID) + ":" + r.MessageID
	}
	if r := m.ReferencedMessage; r != nil {
		in.ReplyToText = r.Content
		if me != nil && r.Author != nil && r.Author.ID == me.ID {
			in.WasMentioned = true
		}
	}
	if me != nil {
		for _, u := range m.Mentions {
			if u != nil && u.ID == me.ID {
				in.WasMentioned = true
			}
		}
	}
	for _, a := range m.Attachments {
		if a != nil && a.URL != "" {
			files = append(files, a)
		}
	}
	return in, files, true
}

// discordDefinite reports errors after which Discord surely did not
// post: a 4xx answer.
func discordDefinite(err error) bool {
	var re *discordgo.RESTError
	return errors.As(err, &re) && re.Response != nil && re.Response.StatusCode >= 400 && re.Response.StatusCode < 500 &&
		re.Response.StatusCode != http.StatusRequestTimeout
}

// Send posts out (text and attachments in one message, as a reply to
// ReplyToID) or edits a posted message; the id is "<channel>:<message>".
func (d *discord) Send(ctx context.Context, out Outbound) (Sent, error) {
	if err := checkOutbound("discord", out, d.Limits()); err != nil {
		return Sent{}, err
	}
	s, err := d.session()
	if err != nil {
		return Sent{}, err
	}
	if out.Edit != "" {
		c, id, ok := strings.Cut(out.Edit, ":")
		if !ok || c == "" || id == "" {
			return Sent{}, refuse("discord", "bad message id %q to edit", out.Edit)
		}
		text := out.Text
		m, err := s.ChannelMessageEditComplex(&discordgo.MessageEdit{ID: id, Channel: c, Content: &text}, discordgo.WithContext(ctx))
		if err != nil {
			return Sent{}, classify(err, discordDefinite)
		}
		return Sent{MessageID: c + ":" + m.ID}, nil
	}
	channel := out.Surface.ID
	if out.Surface.Kind == "thread" && out.Surface.ThreadID != "" {
		channel = out.Surface.ThreadID
	}
	if channel == "" {
		return Sent{}, refuse("discord", "no channel")
	}
	if out.Text == "" && len(out.Media) == 0 {
		return Sent{}, refuse("discord", "nothing to send")
	}
	msg := &discordgo.MessageSend{Content: out.Text}
	if out.ReplyToID != "" {
		if c, id, ok := strings.Cut(out.ReplyToID, ":"); ok && c == channel {
			f := false
			msg.Reference = &discordgo.MessageReference{MessageID: id, ChannelID: c, FailIfNotExists: &f}
		}
	}
	for _, md := range out.Media {
		data, _ := mediaBytes(md, d.maxMedia) // checked above
		msg.Files = append(msg.Files, &discordgo.File{Name: mediaFilename(md), ContentType: md.MimeType, Reader: bytes.NewReader(data)})
	}
	m, err := s.ChannelMessageSendComplex(channel, msg, discordgo.WithContext(ctx))
	if err != nil {
		return Sent{}, classify(err, discordDefinite)
	}
	return Sent{MessageID: channel + ":" + m.ID}, nil
}
