package abi

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckMedia(t *testing.T) {
	png := base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nrest"))
	big := base64.StdEncoding.EncodeToString(make([]byte, MaxMediaBytes+1))
	tests := []struct {
		name  string
		media []MediaInput
		want  string // "" ok, else a piece of the error
	}{
		{"image", []MediaInput{{Type: "image", MimeType: "image/png", Data: png, Filename: "cat.png", Size: 99}}, ""},
		{"url only", []MediaInput{{Type: "document", MimeType: "application/pdf", URL: "https://example.com/a.pdf"}}, ""},
		{"voice with transcription", []MediaInput{{Type: "audio", MimeType: "audio/ogg; codecs=opus", Data: png, Duration: 3, Transcription: "hello"}}, ""},
		{"no type", []MediaInput{{MimeType: "image/png", Data: png}}, "media[0]: type is required"},
		{"bad type", []MediaInput{{Type: "sticker", MimeType: "image/png", Data: png}}, `type "sticker": want one of image, audio, video, document`},
		{"no mime", []MediaInput{{Type: "image", Data: png}}, "mimeType is required"},
		{"bad mime", []MediaInput{{Type: "document", MimeType: "pdf", Data: png}}, "is not a media type"},
		{"mime of another type", []MediaInput{{Type: "image", MimeType: "audio/ogg", Data: png}}, "does not match type image"},
		{"neither", []MediaInput{{Type: "image", MimeType: "image/png"}}, "give data (base64) or a url"},
		{"not base64", []MediaInput{{Type: "image", MimeType: "image/png", Data: "%%%"}}, "not standard base64"},
		{"unpadded", []MediaInput{{Type: "image", MimeType: "image/png", Data: "iVBORw0KGgo"}}, "not standard base64"},
		{"too big", []MediaInput{{Type: "image", MimeType: "image/png", Data: big}}, "over 26214400 bytes"},
		{"file url", []MediaInput{{Type: "image", MimeType: "image/png", URL: "file:///etc/passwd"}}, "want an absolute http(s) URL"},
		{"path filename", []MediaInput{{Type: "image", MimeType: "image/png", Data: png, Filename: "../x"}}, "a name, not a path"},
		{"control filename", []MediaInput{{Type: "image", MimeType: "image/png", Data: png, Filename: "a\nb"}}, "control character"},
		{"negative size", []MediaInput{{Type: "image", MimeType: "image/png", Data: png, Size: -1}}, "negative"},
		{"second bad", []MediaInput{{Type: "image", MimeType: "image/png", Data: png}, {Type: "image"}}, "media[1]:"},
		{"too many", make([]MediaInput, MaxMediaItems+1), "at most 16"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := append([]MediaInput(nil), tt.media...)
			bs, err := CheckMedia(in)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				for i, m := range in {
					if m.Data != "" && (int64(len(bs[i])) != m.Size || m.Size == 0) {
						t.Errorf("item %d: %d bytes, size %d", i, len(bs[i]), m.Size)
					}
				}
				return
			}
			if err == nil || Code(err) != 400 || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want a 400 with %q", err, tt.want)
			}
		})
	}
}

func TestFSReadResultImage(t *testing.T) {
	r := FSReadResult{OK: true, Path: "/home/alice/cat.png", Size: 4, Image: &ImageBlock{Type: "image", Data: "AAAAAA==", MimeType: "image/png"}}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"content":[{"type":"image","data":"AAAAAA==","mimeType":"image/png"}],"ok":true,"path":"/home/alice/cat.png","size":4}`
	if string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
	var back FSReadResult
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Image == nil || *back.Image != *r.Image || back.Path != r.Path || !back.OK || back.Size != 4 {
		t.Fatalf("decoded %+v", back)
	}
	if err := json.Unmarshal([]byte(`{"ok":true,"content":[1,2]}`), &back); err == nil {
		t.Fatal("a content list that is no image block decoded")
	}
}

// FuzzCheckMedia: any media item is either refused with a 400 or
// accepted with its data decoded to at most MaxMediaBytes, its size
// that length, and its mime type one of its kind's.
func FuzzCheckMedia(f *testing.F) {
	f.Add("image", "image/png", "iVBORw0KGgo=", "", "cat.png", int64(0))
	f.Add("audio", "audio/ogg; codecs=opus", "", "https://example.com/v.ogg", "", int64(3))
	f.Add("document", "application/pdf", "JVBERi0=", "http://[::1]/x", "a b.pdf", int64(-1))
	f.Add("video", "video/mp4; x=\"", "====", "https://", "\x00", int64(0))
	f.Fuzz(func(t *testing.T, typ, mt, data, u, name string, size int64) {
		m := []MediaInput{{Type: typ, MimeType: mt, Data: data, URL: u, Filename: name, Size: size}}
		bs, err := CheckMedia(m)
		if err != nil {
			if Code(err) != 400 {
				t.Fatalf("code %d: %v", Code(err), err)
			}
			return
		}
		if len(bs) != 1 || len(bs[0]) > MaxMediaBytes {
			t.Fatalf("%d items", len(bs))
		}
		if data != "" && (int64(len(bs[0])) != m[0].Size || len(bs[0]) == 0) {
			t.Fatalf("size %d, %d bytes", m[0].Size, len(bs[0]))
		}
		if data == "" && u == "" {
			t.Fatal("neither data nor url accepted")
		}
		if typ != "document" && !strings.HasPrefix(strings.ToLower(mt), typ+"/") {
			t.Fatalf("mime %q accepted for %s", mt, typ)
		}
		_ = MediaExt(mt)
	})
}
