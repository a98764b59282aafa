package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMediaFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, content string
		typ, mime     string
	}{
		{"cat.txt", "\x89PNG\r\n\x1a\n....", "image", "image/png"}, // the content decides
		{"v.bin", "OggS\x00\x02....", "audio", "audio/ogg"},
		{"a.pdf", "%PDF-1.7\n", "document", "application/pdf"},
		{"notes.zzz", "hello\n", "document", "text/plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := mediaFiles([]string{write(tt.name, tt.content)}, "hi")
			if err != nil {
				t.Fatal(err)
			}
			if len(m) != 1 || m[0].Type != tt.typ || m[0].MimeType != tt.mime || m[0].Filename != tt.name || m[0].Size != int64(len(tt.content)) {
				t.Fatalf("%+v", m)
			}
		})
	}
	big := write("big.png", "\x89PNG\r\n\x1a\n"+strings.Repeat("x", maxSendFrame))
	if _, err := mediaFiles([]string{big}, ""); err == nil || !strings.Contains(err.Error(), "over the") {
		t.Fatalf("a file over a frame: %v", err)
	}
	if _, err := mediaFiles([]string{write("empty", "")}, ""); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Fatalf("an empty file: %v", err)
	}
}
