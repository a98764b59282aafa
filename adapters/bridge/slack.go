package bridge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"
	"github.com/slack-go/slack/socketmode"

	"gsvfs.dev/gsvfs/abi"
)

// The Slack kind: github.com/slack-go/slack, Socket Mode (events over a
// WebSocket, no public address) in, the Web API (chat.postMessage,
// chat.update, files upload) out. An event's envelope is acknowledged
// only after Sink.Deliver returned nil; Slack hands an unacknowledged
// event out again.

func init() { Register("slack", newSlack) }

const slackMaxText = 40000 // chat.postMessage truncates text past 40,000 characters

type slackKind struct {
	cfg      Config
	api      *slack.Client
	botTok   string
	hc       *http.Client
	ping     time.Duration
	maxMedia int64
}

func newSlack(cfg Config) (Adapter, error) {
	if err := checkOptions("slack", cfg.Options, "ping_timeout", "max_media"); err != nil {
		return nil, err
	}
	var bot, app string
	for _, f := range strings.Fields(cfg.Secret) {
		switch {
		case strings.HasPrefix(f, "xoxb-"):
			bot = f
		case strings.HasPrefix(f, "xapp-"):
			app = f
		}
	}
	if bot == "" || app == "" {
		return nil, errors.New("slack: the token file (--bot-token-file) must hold the bot token (xoxb-...) and the app-level token (xapp-...)")
	}
	ping, err := optSeconds("slack", cfg.Options, "ping_timeout", 30*time.Second)
	if err != nil {
		return nil, err
	}
	maxMedia, err := optInt("slack", cfg.Options, "max_media", defaultMaxMedia)
	if err != nil {
		return nil, err
	}
	s := &slackKind{cfg: cfg, botTok: bot, hc: newHTTPClient(60 * time.Second), ping: ping, maxMedia: maxMedia}
	opts := []slack.Option{slack.OptionAppLevelToken(app), slack.OptionHTTPClient(s.hc)}
	if cfg.BaseURL != "" {
		opts = append(opts, slack.OptionAPIURL(strings.TrimRight(cfg.BaseURL, "/")+"/"))
	}
	s.api = slack.New(bot, opts...)
	return s, nil
}

func (s *slackKind) Kind() string { return "slack" }

func (s *slackKind) Limits() Limits {
	return Limits{MaxText: slackMaxText, CanEdit: true, MaxMedia: s.maxMedia}
}

// Run holds one Socket Mode connection until ctx ends or it fails.
func (s *slackKind) Run(ctx context.Context, sink Sink) error {
	err := s.run(ctx, sink)
	if ctx.Err() != nil {
		return nil
	}
	sink.State(stateErr(s.cfg.Account, err))
	return err
}

func (s *slackKind) run(ctx context.Context, sink Sink) error {
	auth, err := s.api.AuthTestContext(ctx)
	if err != nil {
		return fmt.Errorf("slack: auth.test: %w", err)
	}
	sm := socketmode.New(s.api, socketmode.OptionPingInterval(s.ping))
	smCtx, cancel := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() { runErr <- sm.RunContext(smCtx) }()
	// stop ends the library's loop and waits for it.
	stop := func(err error) error {
		cancel()
		<-runErr
		return err
	}
	connections, renewing := 0, false
	for {
		select {
		case <-ctx.Done():
			return stop(ctx.Err())
		case err := <-runErr:
			cancel()
			if err == nil {
				err = errors.New("connection ended")
			}
			return fmt.Errorf("slack: socket mode: %w", err)
		case ev := <-sm.Events:
			switch ev.Type {
			case socketmode.EventTypeConnecting:
				connections++
				if connections > 1 && !renewing {
					// The connection dropped: the bridge reconnects
					// (with backoff, reporting it), not the library.
					return stop(errors.New("slack: socket mode connection lost"))
				}
				renewing = false
			case socketmode.EventTypeConnected:
				sink.State(abi.AdapterAccountStatus{AccountID: s.cfg.Account, Connected: true, Authenticated: true, Mode: "socket",
					Extra: map[string]string{"bot": auth.User, "userId": auth.UserID, "team": auth.Team}})
			case socketmode.EventTypeDisconnect:
				renewing = true // Slack asked for a fresh connection
			case socketmode.EventTypeInvalidAuth:
				return stop(errors.New("slack: invalid app-level token"))
			case socketmode.EventTypeConnectionError:
				err := errors.New("connection error")
				if ce, ok := ev.Data.(*slack.ConnectionErrorEvent); ok {
					err = ce.ErrorObj
				}
				return stop(fmt.Errorf("slack: socket mode: %w", err))
			case socketmode.EventTypeEventsAPI, socketmode.EventTypeInteractive, socketmode.EventTypeSlashCommand:
				if ev.Request == nil {
					continue
				}
				if ea, ok := ev.Data.(slackevents.EventsAPIEvent); ok {
					if in, files, ok := slackMessage(auth.UserID, auth.BotID, ea.InnerEvent.Data); ok {
						if err := s.fetchFiles(ctx, &in, files); err != nil {
							return stop(err)
						}
						fitInbound(&in)
						if err := sink.Deliver(ctx, in); !Settled(err) {
							return stop(fmt.Errorf("slack: deliver %s: %w", in.MessageID, err))
						}
					}
				}
				if err := sm.AckCtx(ctx, ev.Request.EnvelopeID, nil); err != nil {
					return stop(fmt.Errorf("slack: ack: %w", err))
				}
			}
		}
	}
}

// slackMessage maps a message or app_mention event to an
// AdapterMessage (id "<channel>:<ts>"), and lists its files; ok is
// false for events that are not a person's new message (edits,
// deletions, the bot's own posts).
func slackMessage(meUser, meBot string, data any) (in abi.AdapterMessage, files []slack.File, ok bool) {
	var user, text, ts, thread, channel, ctype, subtype, botID string
	mention := false
	switch e := data.(type) {
	case *slackevents.MessageEvent:
		if e == nil {
			return in, nil, false
		}
		user, text, ts, thread, channel, ctype, subtype, botID = e.User, e.Text, e.TimeStamp, e.ThreadTimeStamp, e.Channel, e.ChannelType, e.SubType, e.BotID
		if e.Message != nil {
			files = e.Message.Files
		}
	case *slackevents.AppMentionEvent:
		if e == nil {
			return in, nil, false
		}
		user, text, ts, thread, channel, botID = e.User, e.Text, e.TimeStamp, e.ThreadTimeStamp, e.Channel, e.BotID
		files, mention = e.Files, true
	default:
		return in, nil, false
	}
	switch subtype {
	case "", "file_share", "thread_broadcast":
	default:
		return in, nil, false
	}
	if channel == "" || ts == "" || user == "" || (meUser != "" && user == meUser) || (meBot != "" && botID == meBot) {
		return in, nil, false
	}
	in = abi.AdapterMessage{MessageID: channel + ":" + ts, Text: text, Actor: &abi.AdapterActor{ID: user},
		Surface: abi.AdapterSurface{ID: channel}, Timestamp: slackTSMillis(ts)}
	if ctype == "" {
		switch channel[0] {
		case 'D':
			ctype = "im"
		case 'G':
			ctype = "group"
		default:
			ctype = "channel"
		}
	}
	switch ctype {
	case "im":
		in.Surface.Kind = "dm"
		mention = true
	case "mpim", "group":
		in.Surface.Kind = "group"
	default:
		in.Surface.Kind = "channel"
	}
	if thread != "" && thread != ts {
		in.Surface.Kind = "thread"
		in.Surface.ThreadID = thread
		in.ReplyToID = channel + ":" + thread
	}
	in.WasMentioned = mention || (meUser != "" && strings.Contains(text, "<@"+meUser+">"))
	return in, files, true
}

// slackTSMillis is a Slack ts ("1700000000.000100") in Unix ms.
func slackTSMillis(ts string) int64 {
	sec, frac, _ := strings.Cut(ts, ".")
	n, err := strconv.ParseInt(sec, 10, 64)
	if err != nil || n < 0 || n > 1<<40 {
		return 0
	}
	ms := n * 1000
	if len(frac) >= 3 {
		if f, err := strconv.Atoi(frac[:3]); err == nil && f >= 0 {
			ms += int64(f)
		}
	}
	return ms
}

// fetchFiles downloads the message's files (with the bot token) into
// its media; one over max_media is named in the text instead.
func (s *slackKind) fetchFiles(ctx context.Context, in *abi.AdapterMessage, files []slack.File) error {
	for _, f := range files {
		url := orDefault(f.URLPrivateDownload, f.URLPrivate)
		if url == "" {
			continue
		}
		if int64(f.Size) > s.maxMedia {
			in.Text += skippedNote(f.Name, int64(f.Size), s.maxMedia)
			continue
		}
		data, ctype, err := download(ctx, s.hc, url, http.Header{"Authorization": {"Bearer " + s.botTok}}, s.maxMedia)
		if errors.Is(err, errTooLarge) {
			in.Text += skippedNote(f.Name, int64(f.Size), s.maxMedia)
			continue
		}
		if err != nil {
			return fmt.Errorf("slack: download %s: %w", f.Name, err)
		}
		in.Media = append(in.Media, newMedia(data, orDefault(f.Mimetype, ctype), f.Name))
	}
	return nil
}

// slackDefinite reports errors after which Slack surely did not post:
// an API refusal ("ok": false) or a 4xx.
func slackDefinite(err error) bool {
	var se slack.SlackErrorResponse
	var sc slack.StatusCodeError
	var rl *slack.RateLimitedError
	return errors.As(err, &se) || errors.As(err, &rl) || (errors.As(err, &sc) && sc.Code >= 400 && sc.Code < 500 && sc.Code != 408)
}

// Send posts out's text (in the surface's thread, or as a reply in the
// thread of ReplyToID), uploads its media, or edits a posted message;
// the id it returns is "<channel>:<ts>".
func (s *slackKind) Send(ctx context.Context, out Outbound) (Sent, error) {
	if err := checkOutbound("slack", out, s.Limits()); err != nil {
		return Sent{}, err
	}
	channel := out.Surface.ID
	if out.Edit != "" {
		c, ts, ok := strings.Cut(out.Edit, ":")
		if !ok || c == "" || ts == "" {
			return Sent{}, refuse("slack", "bad message id %q to edit", out.Edit)
		}
		ch, newTS, _, err := s.api.UpdateMessageContext(ctx, c, ts, slack.MsgOptionText(out.Text, false))
		if err != nil {
			return Sent{}, classify(err, slackDefinite)
		}
		return Sent{MessageID: ch + ":" + newTS}, nil
	}
	if channel == "" {
		return Sent{}, refuse("slack", "no channel")
	}
	if out.Text == "" && len(out.Media) == 0 {
		return Sent{}, refuse("slack", "nothing to send")
	}
	thread := out.Surface.ThreadID
	if thread == "" && out.ReplyToID != "" {
		if c, ts, ok := strings.Cut(out.ReplyToID, ":"); ok && c == channel && out.Surface.Kind != "dm" {
			thread = ts
		}
	}
	var first string
	if out.Text != "" {
		opts := []slack.MsgOption{slack.MsgOptionText(out.Text, false)}
		if thread != "" {
			opts = append(opts, slack.MsgOptionTS(thread))
		}
		ch, ts, err := s.api.PostMessageContext(ctx, channel, opts...)
		if err != nil {
			return Sent{}, classify(err, slackDefinite)
		}
		first = ch + ":" + ts
	}
	for _, md := range out.Media {
		data, _ := mediaBytes(md, s.maxMedia) // checked above
		name := mediaFilename(md)
		_, err := s.api.UploadFileContext(ctx, slack.UploadFileParameters{Reader: bytes.NewReader(data), FileSize: len(data),
			Filename: name, Title: name, Channel: channel, ThreadTimestamp: thread})
		if err != nil {
			err = classify(err, slackDefinite)
			if first != "" && !IsAmbiguous(err) {
				err = Ambiguous(err) // the text is out: the message as a whole may not be retried
			}
			return Sent{MessageID: first}, err
		}
	}
	return Sent{MessageID: first}, nil
}
