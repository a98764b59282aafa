package abi

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Media: what proc.send's media (MediaInput) become once checked and
// stored. The bytes of a MediaInput's Data are kept in the owner's media
// store (/var/media/<user>/<sha256>.<ext>); a conversation's message
// refers to them by a MediaRef, never by a copy of the bytes.

// Media limits: what CheckMedia allows.
const (
	// MaxMediaBytes is the most bytes one media item may carry (decoded),
	// as fs.read's image limit (seed 003: 25 MiB).
	MaxMediaBytes = 25 << 20
	// MaxMediaItems is the most media items one message may carry.
	MaxMediaItems = 16
	// MaxMediaTotal is the most bytes the media of one message may carry
	// together (decoded).
	MaxMediaTotal = 64 << 20
	// MaxMediaText is the longest transcription a media item may carry.
	MaxMediaText = 64 << 10
	// maxMediaName is the longest mimeType, filename or url (bytes).
	maxMediaName = 255
	maxMediaURL  = 2048
)

// MediaTypes are the values of MediaInput.Type.
var MediaTypes = []string{"image", "audio", "video", "document"}

// ImageTypes are the image formats a model is given as an image (the
// ones OpenAI- and Anthropic-compatible models take); other images reach
// a model as a text placeholder.
var ImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// MediaRef is a stored media item, as a conversation's message keeps it:
// its kind and declared mime type, the SHA-256 (hex) of its bytes and
// their Path in the owner's media store, or, for an item given by URL
// only, that URL (a reference nobody fetches). Size is in bytes.
type MediaRef struct {
	Type          string `json:"type"`
	MimeType      string `json:"mimeType"`
	Sha256        string `json:"sha256,omitempty"`
	Path          string `json:"path,omitempty"`
	URL           string `json:"url,omitempty"`
	Filename      string `json:"filename,omitempty"`
	Size          int64  `json:"size,omitempty"`
	Duration      int64  `json:"duration,omitempty"`
	Transcription string `json:"transcription,omitempty"`
}

// MediaFilesArgs are the args of proc.media.list (Uid's store) and
// proc.media.open (the file Name of it).
type MediaFilesArgs struct {
	Uid  uint32 `json:"uid"`
	Name string `json:"name,omitempty"`
}

// MediaFile is a file of a media store: its name (<sha256>.<ext>), size
// in bytes and when it was stored (Unix ms).
type MediaFile struct {
	Name    string `json:"name"`
	Size    int64  `json:"size"`
	Created int64  `json:"created"`
}

// MediaFilesResult is proc.media.list's result.
type MediaFilesResult struct {
	Files []MediaFile `json:"files"`
}

// CheckMedia checks the media of one message and returns each item's
// decoded bytes (nil for an item given by URL only). Every failure is a
// 400 naming the item (media[i]) and what is wrong: too many items or
// bytes, an unknown type, a missing or malformed mimeType (an image's
// must be image/*, audio's audio/*, video's video/*), neither data nor
// url, data that is not standard base64 (padded), a url that is not an
// absolute http(s) URL, a filename with a slash or a control character,
// a negative size or duration, text that is not UTF-8. A given Size is
// replaced by the decoded length.
func CheckMedia(media []MediaInput) ([][]byte, error) {
	if len(media) > MaxMediaItems {
		return nil, E(Invalid, fmt.Sprintf("media: %d items, at most %d", len(media), MaxMediaItems))
	}
	out := make([][]byte, len(media))
	total := 0
	for i := range media {
		b, err := checkMediaItem(&media[i])
		if err != nil {
			return nil, E(Invalid, fmt.Sprintf("media[%d]: %v", i, err))
		}
		total += len(b)
		if total > MaxMediaTotal {
			return nil, E(Invalid, fmt.Sprintf("media: over %d bytes together", MaxMediaTotal))
		}
		out[i] = b
	}
	return out, nil
}

// checkMediaItem checks one item and decodes its data.
func checkMediaItem(m *MediaInput) ([]byte, error) {
	switch m.Type {
	case "image", "audio", "video", "document":
	case "":
		return nil, fmt.Errorf("type is required (one of %s)", strings.Join(MediaTypes, ", "))
	default:
		return nil, fmt.Errorf("type %q: want one of %s", clip(m.Type), strings.Join(MediaTypes, ", "))
	}
	if m.MimeType == "" {
		return nil, fmt.Errorf("mimeType is required")
	}
	if len(m.MimeType) > maxMediaName {
		return nil, fmt.Errorf("mimeType is over %d bytes", maxMediaName)
	}
	mt, _, err := mime.ParseMediaType(m.MimeType)
	if err != nil || !strings.Contains(mt, "/") {
		return nil, fmt.Errorf("mimeType %q is not a media type (type/subtype)", clip(m.MimeType))
	}
	if m.Type != "document" && !strings.HasPrefix(mt, m.Type+"/") {
		return nil, fmt.Errorf("mimeType %q does not match type %s (want %s/...)", clip(m.MimeType), m.Type, m.Type)
	}
	if err := checkMediaText("filename", m.Filename, maxMediaName); err != nil {
		return nil, err
	}
	if strings.ContainsAny(m.Filename, "/\\") {
		return nil, fmt.Errorf("filename %q: a name, not a path", clip(m.Filename))
	}
	if !utf8.ValidString(m.Transcription) {
		return nil, fmt.Errorf("transcription is not UTF-8")
	}
	if len(m.Transcription) > MaxMediaText {
		return nil, fmt.Errorf("transcription is over %d bytes", MaxMediaText)
	}
	if m.Size < 0 || m.Duration < 0 {
		return nil, fmt.Errorf("size and duration may not be negative")
	}
	if m.URL != "" {
		if err := checkMediaURL(m.URL); err != nil {
			return nil, err
		}
	}
	if m.Data == "" {
		if m.URL == "" {
			return nil, fmt.Errorf("give data (base64) or a url")
		}
		return nil, nil
	}
	if len(m.Data) > base64.StdEncoding.EncodedLen(MaxMediaBytes) {
		return nil, fmt.Errorf("data is over %d bytes", MaxMediaBytes)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(m.Data)
	if err != nil {
		return nil, fmt.Errorf("data is not standard base64: %v", err)
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("data is empty")
	}
	if len(b) > MaxMediaBytes {
		return nil, fmt.Errorf("data is over %d bytes", MaxMediaBytes)
	}
	m.Size = int64(len(b))
	return b, nil
}

// checkMediaText checks a short text field: UTF-8, at most n bytes, no
// control characters.
func checkMediaText(what, s string, n int) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s is not UTF-8", what)
	}
	if len(s) > n {
		return fmt.Errorf("%s is over %d bytes", what, n)
	}
	if strings.IndexFunc(s, unicode.IsControl) >= 0 {
		return fmt.Errorf("%s has a control character", what)
	}
	return nil
}

// checkMediaURL checks a media url: an absolute http or https URL with a
// host, at most 2048 bytes, no control characters.
func checkMediaURL(s string) error {
	if err := checkMediaText("url", s, maxMediaURL); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("url %q: want an absolute http(s) URL", clip(s))
	}
	return nil
}

// clip cuts a value quoted in an error to 64 bytes.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	return s[:64] + "..."
}

// MediaExt is the file name extension (without the dot) the media store
// gives a mime type: png, jpg, gif, webp, ogg, mp3, ... ("bin" for one
// it does not know).
func MediaExt(mimeType string) string {
	mt, _, _ := mime.ParseMediaType(mimeType)
	switch mt {
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpg"
	case "image/gif":
		return "gif"
	case "image/webp":
		return "webp"
	case "image/svg+xml":
		return "svg"
	case "audio/ogg", "audio/opus":
		return "ogg"
	case "audio/mpeg":
		return "mp3"
	case "audio/wav", "audio/x-wav":
		return "wav"
	case "audio/mp4", "audio/m4a", "audio/x-m4a":
		return "m4a"
	case "video/mp4":
		return "mp4"
	case "video/webm":
		return "webm"
	case "application/pdf":
		return "pdf"
	case "text/plain":
		return "txt"
	case "text/markdown":
		return "md"
	case "application/json":
		return "json"
	}
	return "bin"
}
