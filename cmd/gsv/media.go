package main

// gsv send --media FILE: the files a message carries, as proc.send's
// media (abi.MediaInput), their bytes in base64 in the request frame.

import (
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"gsvfs.dev/gsvfs/abi"
)

// maxSendFrame is the largest request frame /sys/call takes (the
// namespace's line limit, vfs.MaxLine): a message and its media in
// base64 must fit in it, less room for the frame's other fields.
const maxSendFrame = 1<<20 - 4<<10

// mediaFiles reads files as media items: each one's mime type is its
// content's (http.DetectContentType) when that names an image, audio or
// video format, else its extension's, else the content's; its type is
// image, audio or video by the mime type, document otherwise. The
// encoded items and text together must fit one request frame.
func mediaFiles(files []string, text string) ([]abi.MediaInput, error) {
	var out []abi.MediaInput
	total := len(text)
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("--media %s: %w", name, err)
		}
		if len(b) == 0 {
			return nil, fmt.Errorf("--media %s: the file is empty", name)
		}
		mt := mediaType(b, name)
		typ := "document"
		for _, k := range []string{"image", "audio", "video"} {
			if strings.HasPrefix(mt, k+"/") {
				typ = k
			}
		}
		data := base64.StdEncoding.EncodeToString(b)
		if total += len(data); total > maxSendFrame {
			return nil, fmt.Errorf("--media %s: the message and its media are %d bytes in base64, over the %d one call through /sys/call carries (about %d KiB of files): send a smaller file",
				name, total, maxSendFrame, maxSendFrame/4*3>>10)
		}
		out = append(out, abi.MediaInput{Type: typ, MimeType: mt, Data: data, Filename: filepath.Base(name), Size: int64(len(b))})
	}
	return out, nil
}

// mediaType is the mime type of the file name whose content is b.
func mediaType(b []byte, name string) string {
	sniffed, _, _ := mime.ParseMediaType(http.DetectContentType(b))
	if sniffed == "application/ogg" {
		sniffed = "audio/ogg" // a voice note, most likely; Ogg video is rare
	}
	for _, k := range []string{"image/", "audio/", "video/"} {
		if strings.HasPrefix(sniffed, k) {
			return sniffed
		}
	}
	if byExt, _, err := mime.ParseMediaType(mime.TypeByExtension(filepath.Ext(name))); err == nil && byExt != "" {
		return byExt
	}
	if sniffed == "" {
		return "application/octet-stream"
	}
	return sniffed
}
