package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	tg "github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"gsvfs.dev/gsvfs/abi"
)

// The Telegram kind: the Bot API through github.com/go-telegram/bot,
// long polling getUpdates. The library's own polling loop confirms an
// update (advances the offset) as soon as it is fetched, before any
// handler runs; this kind polls itself, with the library's types, and
// advances the offset past an update only once Sink.Deliver returned
// nil, so Telegram hands an update that was not delivered out again.

func init() { Register("telegram", newTelegram) }

const telegramMaxText = 4096

type telegram struct {
	cfg      Config
	base     string
	bot      *tg.Bot
	hc       *http.Client // sends and downloads
	pollHC   *http.Client // getUpdates: the poll time plus a margin
	poll     time.Duration
	maxMedia int64

	mu     sync.Mutex // guards offset
	offset int64      // the next update id to ask for: all below are delivered
}

func newTelegram(cfg Config) (Adapter, error) {
	if err := checkOptions("telegram", cfg.Options, "poll_timeout", "max_media"); err != nil {
		return nil, err
	}
	tok := strings.TrimSpace(cfg.Secret)
	if tok == "" || strings.ContainsAny(tok, "/ \n") {
		return nil, errors.New("telegram: the bot token (--bot-token-file) is empty or malformed")
	}
	poll, err := optSeconds("telegram", cfg.Options, "poll_timeout", 50*time.Second)
	if err != nil {
		return nil, err
	}
	maxMedia, err := optInt("telegram", cfg.Options, "max_media", defaultMaxMedia)
	if err != nil {
		return nil, err
	}
	base := strings.TrimRight(cfg.BaseURL, "/")
	if base == "" {
		base = "https://api.telegram.org"
	}
	t := &telegram{cfg: cfg, base: base, poll: poll, maxMedia: maxMedia,
		hc: newHTTPClient(60 * time.Second), pollHC: newHTTPClient(poll + 10*time.Second)}
	t.bot, err = tg.New(tok, tg.WithSkipGetMe(), tg.WithServerURL(base),
		tg.WithHTTPClient(poll, t.hc),
		tg.WithErrorsHandler(func(err error) { slog.Warn("telegram", "account", cfg.Account, "err", err) }))
	if err != nil {
		return nil, fmt.Errorf("telegram: %w", err)
	}
	return t, nil
}

func (t *telegram) Kind() string { return "telegram" }

func (t *telegram) Limits() Limits {
	return Limits{MaxText: telegramMaxText, CanEdit: true, MaxMedia: t.maxMedia}
}

// Run polls getUpdates until ctx ends or a poll fails.
func (t *telegram) Run(ctx context.Context, sink Sink) error {
	err := t.run(ctx, sink)
	if ctx.Err() != nil {
		return nil
	}
	sink.State(stateErr(t.cfg.Account, err))
	return err
}

func (t *telegram) run(ctx context.Context, sink Sink) error {
	me, err := t.bot.GetMe(ctx)
	if err != nil {
		return fmt.Errorf("telegram: getMe: %w", err)
	}
	sink.State(abi.AdapterAccountStatus{AccountID: t.cfg.Account, Connected: true, Authenticated: true,
		Mode: "polling", Extra: map[string]string{"bot": "@" + me.Username, "id": strconv.FormatInt(me.ID, 10)}})
	for {
		t.mu.Lock()
		offset := t.offset
		t.mu.Unlock()
		ups, err := t.getUpdates(ctx, offset)
		if err != nil {
			return fmt.Errorf("telegram: getUpdates: %w", err)
		}
		for _, u := range ups {
			if m := telegramMessageOf(u); m != nil {
				in, files := telegramMessage(me, m)
				if err := t.fetchFiles(ctx, &in, files); err != nil {
					return err
				}
				fitInbound(&in)
				if err := sink.Deliver(ctx, in); !Settled(err) {
					return fmt.Errorf("telegram: deliver update %d: %w", u.ID, err)
				}
			}
			t.mu.Lock()
			if u.ID+1 > t.offset {
				t.offset = u.ID + 1
			}
			t.mu.Unlock()
		}
	}
}

// getUpdates long-polls for updates from offset on; asking for offset
// confirms every update below it to Telegram.
func (t *telegram) getUpdates(ctx context.Context, offset int64) ([]*models.Update, error) {
	body, _ := json.Marshal(struct {
		Offset         int64    `json:"offset"`
		Timeout        int      `json:"timeout"`
		AllowedUpdates []string `json:"allowed_updates"`
	}{offset, int(t.poll / time.Second), []string{"message", "channel_post"}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.base+"/bot"+t.bot.Token()+"/getUpdates", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.pollHC.Do(req)
	if err != nil {
		return nil, redactURL(err, t.bot.Token())
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	var r struct {
		OK          bool             `json:"ok"`
		Result      []*models.Update `json:"result"`
		Description string           `json:"description"`
		ErrorCode   int              `json:"error_code"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("bad answer (http %d): %w", resp.StatusCode, err)
	}
	if !r.OK {
		return nil, fmt.Errorf("error %d: %s", r.ErrorCode, r.Description)
	}
	for _, u := range r.Result {
		if u == nil {
			return nil, errors.New("bad answer: a null update")
		}
	}
	return r.Result, nil
}

func telegramMessageOf(u *models.Update) *models.Message {
	if u.Message != nil {
		return u.Message
	}
	return u.ChannelPost
}

// telegramFile is an attachment to download with getFile.
type telegramFile struct {
	id, mime, name, typ string
	size                int64
}

// telegramMessage maps a Telegram message for the bot me to an
// AdapterMessage, and lists its attachments. The message id is
// "<chat>:<message>" (message ids count per chat).
func telegramMessage(me *models.User, m *models.Message) (abi.AdapterMessage, []telegramFile) {
	chat := strconv.FormatInt(m.Chat.ID, 10)
	in := abi.AdapterMessage{
		MessageID: chat + ":" + strconv.Itoa(m.ID),
		Surface:   abi.AdapterSurface{ID: chat, Handle: m.Chat.Username},
		Text:      m.Text,
		Timestamp: int64(m.Date) * 1000,
	}
	if in.Text == "" {
		in.Text = m.Caption
	}
	switch m.Chat.Type {
	case models.ChatTypePrivate:
		in.Surface.Kind = "dm"
		in.Surface.Name = strings.TrimSpace(m.Chat.FirstName + " " + m.Chat.LastName)
		in.WasMentioned = true
	case models.ChatTypeChannel:
		in.Surface.Kind = "channel"
		in.Surface.Name = m.Chat.Title
	default:
		in.Surface.Kind = "group"
		in.Surface.Name = m.Chat.Title
	}
	if m.IsTopicMessage && m.MessageThreadID != 0 {
		in.Surface.Kind = "thread"
		in.Surface.ThreadID = strconv.Itoa(m.MessageThreadID)
	}
	switch {
	case m.From != nil:
		in.Actor = &abi.AdapterActor{ID: strconv.FormatInt(m.From.ID, 10),
			Name: strings.TrimSpace(m.From.FirstName + " " + m.From.LastName), Handle: m.From.Username}
	case m.SenderChat != nil:
		in.Actor = &abi.AdapterActor{ID: strconv.FormatInt(m.SenderChat.ID, 10), Name: m.SenderChat.Title, Handle: m.SenderChat.Username}
	}
	if r := m.ReplyToMessage; r != nil {
		in.ReplyToID = chat + ":" + strconv.Itoa(r.ID)
		in.ReplyToText = r.Text
		if in.ReplyToText == "" {
			in.ReplyToText = r.Caption
		}
		if me != nil && r.From != nil && r.From.ID == me.ID {
			in.WasMentioned = true
		}
	}
	if me != nil {
		if me.Username != "" && strings.Contains(strings.ToLower(in.Text), "@"+strings.ToLower(me.Username)) {
			in.WasMentioned = true
		}
		for _, e := range append(m.Entities, m.CaptionEntities...) {
			if e.Type == models.MessageEntityTypeTextMention && e.User != nil && e.User.ID == me.ID {
				in.WasMentioned = true
			}
		}
	}
	var files []telegramFile
	if n := len(m.Photo); n > 0 {
		p := m.Photo[n-1] // the largest size comes last
		files = append(files, telegramFile{id: p.FileID, mime: "image/jpeg", name: "photo.jpg", typ: "image", size: int64(p.FileSize)})
	}
	if v := m.Voice; v != nil {
		files = append(files, telegramFile{id: v.FileID, mime: orDefault(v.MimeType, "audio/ogg"), name: "voice.ogg", typ: "audio", size: v.FileSize})
	}
	if a := m.Audio; a != nil {
		files = append(files, telegramFile{id: a.FileID, mime: orDefault(a.MimeType, "audio/mpeg"), name: orDefault(a.FileName, "audio"), typ: "audio", size: a.FileSize})
	}
	if v := m.Video; v != nil {
		files = append(files, telegramFile{id: v.FileID, mime: orDefault(v.MimeType, "video/mp4"), name: orDefault(v.FileName, "video.mp4"), typ: "video", size: v.FileSize})
	}
	if d := m.Document; d != nil {
		files = append(files, telegramFile{id: d.FileID, mime: d.MimeType, name: orDefault(d.FileName, "document"), size: d.FileSize})
	}
	return in, files
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// fetchFiles downloads files (getFile, then the file path) into in's
// media; one over max_media is named in the text instead.
func (t *telegram) fetchFiles(ctx context.Context, in *abi.AdapterMessage, files []telegramFile) error {
	for _, f := range files {
		if f.size > t.maxMedia {
			in.Text += skippedNote(f.name, f.size, t.maxMedia)
			continue
		}
		tf, err := t.bot.GetFile(ctx, &tg.GetFileParams{FileID: f.id})
		if err != nil {
			return fmt.Errorf("telegram: getFile: %w", redactURL(err, t.bot.Token()))
		}
		data, _, err := download(ctx, t.hc, t.bot.FileDownloadLink(tf), nil, t.maxMedia)
		if errors.Is(err, errTooLarge) {
			in.Text += skippedNote(f.name, tf.FileSize, t.maxMedia)
			continue
		}
		if err != nil {
			return fmt.Errorf("telegram: download %s: %w", f.name, redactURL(err, t.bot.Token()))
		}
		md := newMedia(data, f.mime, f.name)
		if f.typ != "" {
			md.Type = f.typ
		}
		in.Media = append(in.Media, md)
	}
	return nil
}

// telegramIDs parses a "<chat>:<message>" id.
func telegramIDs(id string) (chat string, msg int, err error) {
	i := strings.LastIndexByte(id, ':')
	if i < 0 {
		msg, err = strconv.Atoi(id)
		return "", msg, err
	}
	msg, err = strconv.Atoi(id[i+1:])
	return id[:i], msg, err
}

// telegramChat is a chat_id: a number, or an @channel name.
func telegramChat(s string) (any, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	if strings.HasPrefix(s, "@") && len(s) > 1 {
		return s, nil
	}
	return nil, fmt.Errorf("telegram: bad chat id %q", s)
}

// telegramDefinite reports errors after which Telegram surely did not
// post: an API refusal.
func telegramDefinite(err error) bool {
	var tm *tg.TooManyRequestsError
	var mg *tg.MigrateError
	return errors.Is(err, tg.ErrorBadRequest) || errors.Is(err, tg.ErrorForbidden) ||
		errors.Is(err, tg.ErrorUnauthorized) || errors.Is(err, tg.ErrorNotFound) ||
		errors.Is(err, tg.ErrorConflict) || errors.As(err, &tm) || errors.As(err, &mg)
}

// Send posts out's text (then each medium) to the chat, or edits a
// posted message; the id it returns is "<chat>:<message>" of the first
// message posted.
func (t *telegram) Send(ctx context.Context, out Outbound) (Sent, error) {
	if err := checkOutbound("telegram", out, t.Limits()); err != nil {
		return Sent{}, err
	}
	chatS := out.Surface.ID
	if out.Edit != "" {
		c, msg, err := telegramIDs(out.Edit)
		if err != nil {
			return Sent{}, refuse("telegram", "bad message id %q to edit", out.Edit)
		}
		if c != "" {
			chatS = c
		}
		chat, err := telegramChat(chatS)
		if err != nil {
			return Sent{}, err
		}
		m, err := t.bot.EditMessageText(ctx, &tg.EditMessageTextParams{ChatID: chat, MessageID: msg, Text: out.Text})
		if err != nil {
			return Sent{}, classify(redactURL(err, t.bot.Token()), telegramDefinite)
		}
		return Sent{MessageID: chatS + ":" + strconv.Itoa(m.ID)}, nil
	}
	chat, err := telegramChat(chatS)
	if err != nil {
		return Sent{}, err
	}
	if out.Text == "" && len(out.Media) == 0 {
		return Sent{}, refuse("telegram", "nothing to send")
	}
	thread := 0
	if out.Surface.ThreadID != "" {
		if thread, err = strconv.Atoi(out.Surface.ThreadID); err != nil {
			return Sent{}, refuse("telegram", "bad thread id %q", out.Surface.ThreadID)
		}
	}
	var reply *models.ReplyParameters
	if out.ReplyToID != "" {
		if _, msg, err := telegramIDs(out.ReplyToID); err == nil {
			reply = &models.ReplyParameters{MessageID: msg, AllowSendingWithoutReply: true}
		}
	}
	var first string
	post := func(m *models.Message, err error) error {
		if err != nil {
			return classify(redactURL(err, t.bot.Token()), telegramDefinite)
		}
		if first == "" {
			first = chatS + ":" + strconv.Itoa(m.ID)
		}
		reply = nil
		return nil
	}
	if out.Text != "" {
		if err := post(t.bot.SendMessage(ctx, &tg.SendMessageParams{ChatID: chat, MessageThreadID: thread, Text: out.Text, ReplyParameters: reply})); err != nil {
			return Sent{}, err
		}
	}
	for _, md := range out.Media {
		data, _ := mediaBytes(md, t.maxMedia) // checked above
		f := &models.InputFileUpload{Filename: mediaFilename(md), Data: bytes.NewReader(data)}
		var err error
		switch {
		case md.Type == "image" || (md.Type == "" && strings.HasPrefix(md.MimeType, "image/")):
			err = post(t.bot.SendPhoto(ctx, &tg.SendPhotoParams{ChatID: chat, MessageThreadID: thread, Photo: f, ReplyParameters: reply}))
		case md.MimeType == "audio/ogg" || md.MimeType == "audio/opus":
			err = post(t.bot.SendVoice(ctx, &tg.SendVoiceParams{ChatID: chat, MessageThreadID: thread, Voice: f, ReplyParameters: reply}))
		case md.Type == "audio":
			err = post(t.bot.SendAudio(ctx, &tg.SendAudioParams{ChatID: chat, MessageThreadID: thread, Audio: f, ReplyParameters: reply}))
		case md.Type == "video":
			err = post(t.bot.SendVideo(ctx, &tg.SendVideoParams{ChatID: chat, MessageThreadID: thread, Video: f, ReplyParameters: reply}))
		default:
			err = post(t.bot.SendDocument(ctx, &tg.SendDocumentParams{ChatID: chat, MessageThreadID: thread, Document: f, ReplyParameters: reply}))
		}
		if err != nil {
			if first != "" {
				// Part of the message is out: whatever failed, the
				// message as a whole may not be retried.
				return Sent{MessageID: first}, Ambiguous(err)
			}
			return Sent{}, err
		}
	}
	return Sent{MessageID: first}, nil
}

// redactURL2 is redactURL keeping err's chain (for classification) when
// err does not quote the token.
func redactURL(err error, tok string) error {
	if !strings.Contains(err.Error(), tok) {
		return err
	}
	return &redacted{msg: strings.ReplaceAll(err.Error(), tok, "***"), err: err}
}

type redacted struct {
	msg string
	err error
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
