package bridge

// Helpers the platform kinds (telegram.go, slack.go, discord.go,
// email.go) share: HTTP status classification, media download and
// encoding, option parsing.

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// defaultMaxMedia is the largest attachment a kind downloads or uploads
// unless its max_media option says otherwise: 20 MiB.
const defaultMaxMedia = 20 << 20

// statusError is an HTTP answer of 408 or 5xx: the platform may or may
// not have acted on the request.
type statusError struct{ Code int }

func (e *statusError) Error() string { return fmt.Sprintf("http status %d", e.Code) }

// statusTransport turns a 408 or 5xx answer into a *statusError, so a
// client library's error for it can be told apart from a definite
// refusal (4xx) whatever the library does with the body.
type statusTransport struct{ base http.RoundTripper }

func (t statusTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	resp, err := base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500 {
		resp.Body.Close()
		return nil, &statusError{Code: resp.StatusCode}
	}
	return resp, nil
}

// newHTTPClient is a client whose requests end after timeout and whose
// 408/5xx answers are *statusError.
func newHTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{Timeout: timeout, Transport: statusTransport{base: http.DefaultTransport.(*http.Transport).Clone()}}
}

// notSent reports whether err shows that a request never reached the
// platform: the connection could not be made.
func notSent(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// classify wraps a Send failure with Ambiguous unless definite says the
// platform refused the request or it never left: a failure after which
// the message may have been posted is never reported as a plain error.
func classify(err error, definite func(error) bool) error {
	if err == nil || notSent(err) || (definite != nil && definite(err)) {
		return err
	}
	return Ambiguous(err)
}

// refuse is a Send failure found before anything was sent.
func refuse(kind, format string, args ...any) error {
	return fmt.Errorf(kind+": "+format, args...)
}

// checkOutbound refuses text over maxText bytes and media over maxMedia
// bytes (or any media when maxMedia is 0), before anything is sent: the
// bridge splits long text at the kind's Limits.
func checkOutbound(kind string, out Outbound, lim Limits) error {
	if len(out.Text) > lim.MaxText {
		return refuse(kind, "text of %d bytes is over the %d-byte limit", len(out.Text), lim.MaxText)
	}
	if out.Edit != "" && len(out.Media) > 0 {
		return refuse(kind, "an edit carries no media")
	}
	for _, m := range out.Media {
		if _, err := mediaBytes(m, lim.MaxMedia); err != nil {
			return refuse(kind, "%v", err)
		}
	}
	return nil
}

// mediaBytes decodes m's base64 Data, refusing media given only by URL
// and media over max bytes.
func mediaBytes(m abi.MediaInput, max int64) ([]byte, error) {
	if m.Data == "" {
		return nil, fmt.Errorf("media %q has no data (media by URL is not sent)", m.Filename)
	}
	if int64(base64.StdEncoding.DecodedLen(len(m.Data))) > max+3 {
		return nil, fmt.Errorf("media %q is over the %d-byte limit", m.Filename, max)
	}
	b, err := base64.StdEncoding.DecodeString(m.Data)
	if err != nil {
		return nil, fmt.Errorf("media %q: bad base64: %v", m.Filename, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("media %q is over the %d-byte limit", m.Filename, max)
	}
	return b, nil
}

// mediaType is the MediaInput type of a MIME type.
func mediaType(mimeType string) string {
	switch {
	case strings.HasPrefix(mimeType, "image/"):
		return "image"
	case strings.HasPrefix(mimeType, "audio/"):
		return "audio"
	case strings.HasPrefix(mimeType, "video/"):
		return "video"
	}
	return "document"
}

// mediaFilename is m's file name, or one made from its type.
func mediaFilename(m abi.MediaInput) string {
	if m.Filename != "" {
		return path.Base(m.Filename)
	}
	ext := ".bin"
	if exts, _ := mime.ExtensionsByType(m.MimeType); len(exts) > 0 {
		ext = exts[0]
	}
	return m.Type + ext
}

// newMedia is a MediaInput carrying data; mimeType "" is guessed from
// the file name, then application/octet-stream.
func newMedia(data []byte, mimeType, filename string) abi.MediaInput {
	if i := strings.IndexByte(mimeType, ';'); i >= 0 {
		mimeType = mimeType[:i]
	}
	mimeType = strings.TrimSpace(mimeType)
	if mimeType == "" {
		mimeType, _, _ = strings.Cut(mime.TypeByExtension(path.Ext(filename)), ";")
	}
	if mimeType == "" {
		mimeType = "application/octet-stream"
	}
	return abi.MediaInput{
		Type:     mediaType(mimeType),
		MimeType: mimeType,
		Data:     base64.StdEncoding.EncodeToString(data),
		Filename: filename,
		Size:     int64(len(data)),
	}
}

// errTooLarge is a download over the kind's max_media.
var errTooLarge = errors.New("over the media size limit")

// download GETs url with the given headers, refusing bodies over max
// bytes (errTooLarge).
func download(ctx context.Context, c *http.Client, url string, hdr http.Header, max int64) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, "", err
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, "", fmt.Errorf("download: http status %d", resp.StatusCode)
	}
	if resp.ContentLength > max {
		return nil, "", errTooLarge
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, max+1))
	if err != nil {
		return nil, "", err
	}
	if int64(len(b)) > max {
		return nil, "", errTooLarge
	}
	return b, resp.Header.Get("Content-Type"), nil
}

// skippedNote is the text added to a message for an attachment that is
// not carried (over max_media).
func skippedNote(name string, size int64, max int64) string {
	return fmt.Sprintf("\n[attachment %q (%d bytes) not carried: over the %d-byte limit]", name, size, max)
}

// optInt reads option key as a positive integer, def if unset.
func optInt(kind string, opts map[string]string, key string, def int64) (int64, error) {
	v, ok := opts[key]
	if !ok || v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s: option %s=%q: want a positive integer", kind, key, v)
	}
	return n, nil
}

// optSeconds reads option key as a positive number of seconds.
func optSeconds(kind string, opts map[string]string, key string, def time.Duration) (time.Duration, error) {
	n, err := optInt(kind, opts, key, int64(def/time.Second))
	return time.Duration(n) * time.Second, err
}

// checkOptions refuses options a kind does not know.
func checkOptions(kind string, opts map[string]string, known ...string) error {
	for k := range opts {
		ok := false
		for _, kn := range known {
			ok = ok || k == kn
		}
		if !ok {
			return fmt.Errorf("%s: unknown option %q (known: %s)", kind, k, strings.Join(known, ", "))
		}
	}
	return nil
}

// stateErr is the status an account has after err ended its connection.
func stateErr(account string, err error) abi.AdapterAccountStatus {
	return abi.AdapterAccountStatus{AccountID: account, Error: err.Error()}
}

// fitInbound makes in acceptable to adapter.inbound whatever the
// platform sent, so that a message the kernel would refuse is not
// handed out again and again: text as valid UTF-8; each medium with a
// file name (not a path, no control characters, at most 255 bytes), a
// parseable MIME type matching its type, non-empty data; at most
// 8 items (the adapters room's bound) of abi.MaxMediaBytes each and
// abi.MaxMediaTotal together; text and reply text within 32 KiB, ids
// within 256 bytes (a longer message id is replaced by its SHA-256, a
// longer reply id dropped). What does not fit is named in the text.
func fitInbound(in *abi.AdapterMessage) {
	in.Text = strings.ToValidUTF8(in.Text, "\uFFFD")
	in.ReplyToText = clipUTF8(strings.ToValidUTF8(in.ReplyToText, "\uFFFD"), inboundMaxText)
	if len(in.MessageID) > inboundMaxID {
		sum := sha256.Sum256([]byte(in.MessageID))
		in.MessageID = "sha256:" + hex.EncodeToString(sum[:])
	}
	if len(in.ReplyToID) > inboundMaxID {
		in.ReplyToID = ""
	}
	defer func() { // the notes added below count too
		if len(in.Text) > inboundMaxText {
			const cut = "\n[text cut: over the message limit]"
			in.Text = clipUTF8(in.Text, inboundMaxText-len(cut)) + cut
		}
	}()
	var kept []abi.MediaInput
	var total int64
	for _, m := range in.Media {
		m.Filename = fitName(m.Filename)
		if mt, _, err := mime.ParseMediaType(m.MimeType); err != nil || !strings.Contains(mt, "/") || len(m.MimeType) > 255 {
			m.MimeType = "application/octet-stream"
		}
		if t := mediaType(m.MimeType); m.Type != t && (m.Type != "document" || t != "document") {
			m.Type = t
			if !strings.HasPrefix(m.MimeType, t+"/") {
				m.Type = "document"
			}
		}
		m.Transcription = strings.ToValidUTF8(m.Transcription, "")
		n := int64(base64.StdEncoding.DecodedLen(len(m.Data)))
		switch {
		case m.Data == "" || m.Size == 0:
			in.Text += fmt.Sprintf("\n[attachment %q not carried: empty]", m.Filename)
			continue
		case len(kept) >= inboundMaxMedia || n > abi.MaxMediaBytes || total+n > abi.MaxMediaTotal:
			in.Text += fmt.Sprintf("\n[attachment %q (%d bytes) not carried: over the message's media limits]", m.Filename, m.Size)
			continue
		}
		if _, err := abi.CheckMedia([]abi.MediaInput{m}); err != nil {
			in.Text += fmt.Sprintf("\n[attachment %q not carried: %v]", m.Filename, err)
			continue
		}
		total += n
		kept = append(kept, m)
	}
	in.Media = kept
}

// The kernel's bounds of an inbound message (adapters.MaxInboundText and
// the adapters room's checkMessage): a message past them is refused.
const (
	inboundMaxText  = 32 << 10
	inboundMaxMedia = 8
	inboundMaxID    = 256
)

// clipUTF8 cuts s to at most n bytes at a character boundary.
func clipUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// fitName is a file name acceptable to abi.CheckMedia: the last path
// element, control characters dropped, at most 255 bytes of UTF-8.
func fitName(s string) string {
	s = strings.ToValidUTF8(s, "")
	if i := strings.LastIndexAny(s, "/\\"); i >= 0 {
		s = s[i+1:]
	}
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	for len(s) > 255 {
		_, n := utf8.DecodeLastRuneInString(s)
		s = s[:len(s)-n]
	}
	if s == "" || s == "." || s == ".." {
		s = "attachment"
	}
	return s
}
