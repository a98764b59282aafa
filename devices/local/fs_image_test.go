package local_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// TestFSReadImage: fs.read of an image file (PNG, JPEG, GIF by their
// content, whatever the name) is its image block; a text file named .png
// is text; Raw reads (CodeMode's) keep refusing binary files.
func TestFSReadImage(t *testing.T) {
	k, _, alice, _ := newKernel(t)
	ctx := context.Background()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	encode := func(f func(*bytes.Buffer) error) string {
		var b bytes.Buffer
		if err := f(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	pngData := encode(func(b *bytes.Buffer) error { return png.Encode(b, img) })
	jpegData := encode(func(b *bytes.Buffer) error { return jpeg.Encode(b, img, nil) })
	gifData := encode(func(b *bytes.Buffer) error { return gif.Encode(b, img, nil) })
	tests := []struct {
		name, path, content string
		raw                 bool
		mime                string // the image's, "" for none
		want                string // a piece of the content or error
	}{
		{"png", "~/cat.png", pngData, false, "image/png", ""},
		{"png by content", "~/cat.txt", pngData, false, "image/png", ""},
		{"jpeg", "~/cat.jpg", jpegData, false, "image/jpeg", ""},
		{"gif", "~/cat.gif", gifData, false, "image/gif", ""},
		{"text named png", "~/notes.png", "not an image\n", false, "", "     1\tnot an image\n"},
		{"raw png", "~/raw.png", pngData, true, "", "binary file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &kernel.Caller{Identity: alice}
			if _, err := k.Call(ctx, c, "fs.write", &abi.FSWriteArgs{Path: tt.path, Content: tt.content}); err != nil {
				t.Fatal(err)
			}
			res, err := k.Call(ctx, c, "fs.read", &abi.FSReadArgs{Path: tt.path, Raw: tt.raw})
			if err != nil {
				t.Fatal(err)
			}
			r := res.(*abi.FSReadResult)
			switch {
			case tt.mime != "":
				if !r.OK || r.Image == nil || r.Image.MimeType != tt.mime || r.Image.Type != "image" || r.Content != "" || r.Size != int64(len(tt.content)) {
					t.Fatalf("read: %+v", r)
				}
				if b, err := base64.StdEncoding.DecodeString(r.Image.Data); err != nil || string(b) != tt.content {
					t.Fatalf("the image's data is not the file's: %v", err)
				}
			case r.OK:
				if r.Image != nil || !strings.Contains(r.Content, tt.want) {
					t.Fatalf("read: %+v", r)
				}
			default:
				if !strings.Contains(r.Error, tt.want) {
					t.Fatalf("read: %+v", r)
				}
			}
		})
	}
}
