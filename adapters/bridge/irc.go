package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ergochat/irc-go/ircevent"
	"github.com/ergochat/irc-go/ircmsg"

	"gsvfs.dev/gsvfs/abi"
)

// The IRC kind, on github.com/ergochat/irc-go's ircevent. --base-url is
// the server, host:port; --bot-token-file, if given, its password.
// Options: nick (default gsv), channels (comma-separated, joined on
// connect), tls (default true). A private message is a DM (its surface
// and actor are the sender's nick); a channel message is a channel
// surface, mentioned when it starts with "<nick>:" or "<nick>," (which
// is stripped). IRC has no message ids: a message's is its msgid tag when
// the server gives one, else the connection's start and a count.

// ircLine is the most bytes of text one PRIVMSG carries.
const ircLine = 400

func init() {
	Register("irc", func(cfg Config) (Adapter, error) {
		if cfg.BaseURL == "" {
			return nil, errors.New("irc: give the server as --base-url host:port")
		}
		a := &ircAdapter{cfg: cfg, nick: "gsv", useTLS: true}
		for k, v := range cfg.Options {
			switch k {
			case "nick":
				a.nick = v
			case "channels":
				for _, c := range strings.Split(v, ",") {
					if c = strings.TrimSpace(c); c != "" {
						a.channels = append(a.channels, c)
					}
				}
			case "tls":
				b, err := strconv.ParseBool(v)
				if err != nil {
					return nil, fmt.Errorf("irc: tls=%q: want true or false", v)
				}
				a.useTLS = b
			default:
				return nil, fmt.Errorf("irc: unknown option %q (nick, channels, tls)", k)
			}
		}
		return a, nil
	})
}

// ircAdapter is the IRC kind's Adapter.
type ircAdapter struct {
	cfg      Config
	nick     string
	channels []string
	useTLS   bool

	mu   sync.Mutex
	conn *ircevent.Connection // the live connection, nil while none
}

// Kind implements Adapter.
func (*ircAdapter) Kind() string { return "irc" }

// Limits implements Adapter: Send cuts lines itself; IRC cannot edit.
func (*ircAdapter) Limits() Limits { return Limits{MaxText: 4000} }

// Run implements Adapter: one connection, until ctx ends or the server
// drops it.
func (a *ircAdapter) Run(ctx context.Context, sink Sink) error {
	c := &ircevent.Connection{Server: a.cfg.BaseURL, Nick: a.nick, User: a.nick, RealName: "gsvfs adapter",
		Password: a.cfg.Secret, UseTLS: a.useTLS, Timeout: 30 * time.Second, KeepAlive: time.Minute,
		RequestCaps: []string{"message-tags"}, QuitMessage: "bye", Log: log.New(io.Discard, "", 0)}
	if a.useTLS {
		host, _, _ := strings.Cut(a.cfg.BaseURL, ":")
		c.TLSConfig = &tls.Config{ServerName: host}
	}
	ended := make(chan struct{})
	var once sync.Once
	start := time.Now().UnixNano()
	var seq atomic.Int64
	c.AddConnectCallback(func(ircmsg.Message) {
		for _, ch := range a.channels {
			c.Join(ch)
		}
		sink.State(abi.AdapterAccountStatus{Connected: true, Authenticated: true, Mode: "irc", LastActivity: time.Now().UnixMilli(),
			Extra: map[string]string{"server": a.cfg.BaseURL, "nick": c.CurrentNick()}})
	})
	c.AddDisconnectCallback(func(ircmsg.Message) { once.Do(func() { close(ended) }) })
	c.AddCallback("PRIVMSG", func(m ircmsg.Message) {
		if len(m.Params) < 2 {
			return
		}
		id := fmt.Sprintf("%d-%d", start, seq.Add(1))
		if ok, v := m.GetTag("msgid"); ok && v != "" {
			id = v
		}
		in, ok := ircInbound(m.Nick(), m.Params[0], m.Params[1], c.CurrentNick(), id)
		if !ok {
			return
		}
		// A callback runs on the reading goroutine: the message is handed
		// in on one of its own, so a slow kernel does not stall the
		// connection's pings.
		go func() {
			if err := sink.Deliver(ctx, in); !Settled(err) {
				sink.State(abi.AdapterAccountStatus{Connected: true, Authenticated: true, Mode: "irc", Error: err.Error()})
			}
		}()
	})
	if err := c.Connect(); err != nil {
		return err
	}
	a.mu.Lock()
	a.conn = c
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.conn = nil
		a.mu.Unlock()
	}()
	select {
	case <-ctx.Done():
		c.Quit()
		return nil
	case <-ended:
		c.Quit()
		return errors.New("irc: the server ended the connection")
	}
}

// ircInbound is a PRIVMSG from nick to target as an inbound message:
// false for what is not one (a CTCP, empty text, no sender).
func ircInbound(nick, target, text, me, id string) (abi.AdapterMessage, bool) {
	if nick == "" || text == "" || strings.HasPrefix(text, "\x01") {
		return abi.AdapterMessage{}, false
	}
	m := abi.AdapterMessage{MessageID: id, Actor: &abi.AdapterActor{ID: nick, Name: nick, Handle: nick}, Text: text,
		Timestamp: time.Now().UnixMilli()}
	if strings.HasPrefix(target, "#") || strings.HasPrefix(target, "&") {
		m.Surface = abi.AdapterSurface{Kind: "channel", ID: target, Name: target}
		for _, sep := range []string{":", ","} {
			if me != "" && len(text) > len(me) && strings.EqualFold(text[:len(me)], me) && strings.HasPrefix(text[len(me):], sep) {
				m.Text = strings.TrimSpace(text[len(me)+1:])
				m.WasMentioned = true
				break
			}
		}
	} else {
		m.Surface = abi.AdapterSurface{Kind: "dm", ID: nick, Name: nick}
	}
	return m, m.Text != ""
}

// Send implements Adapter: a PRIVMSG per line of text, each cut at
// ircLine bytes, to the channel or the DM's nick. IRC gives no id.
func (a *ircAdapter) Send(ctx context.Context, out Outbound) (Sent, error) {
	a.mu.Lock()
	c := a.conn
	a.mu.Unlock()
	if c == nil || !c.Connected() {
		return Sent{}, errors.New("irc: not connected")
	}
	target := out.Surface.ID
	if target == "" || strings.ContainsAny(target, " \r\n\x00") {
		return Sent{}, fmt.Errorf("irc: bad target %q", target)
	}
	var lines []string
	for _, l := range strings.Split(strings.ReplaceAll(out.Text, "\r", ""), "\n") {
		lines = append(lines, Split(l, ircLine)...)
	}
	for i, l := range lines {
		if l == "" {
			continue
		}
		if err := c.Privmsg(target, l); err != nil {
			if i > 0 {
				return Sent{}, Ambiguous(err)
			}
			return Sent{}, err
		}
	}
	return Sent{}, nil
}
