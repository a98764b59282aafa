package export_test

import (
	"encoding/base64"
	"os"
	"path/filepath"
	"testing"

	"gsvfs.dev/gsvfs/devices/export"
)

// TestReadImage: a device's fs.read of an image file answers the seed's
// image block, as the local device does (local.Numbered).
func TestReadImage(t *testing.T) {
	_, root, fsys := serve(t, export.Options{})
	pic := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	if err := os.WriteFile(filepath.Join(root, "cat.bin"), pic, 0o644); err != nil {
		t.Fatal(err)
	}
	c := openCall(t, fsys)
	d := c.ok("fs.read", map[string]any{"path": "cat.bin"})
	blocks, _ := d["content"].([]any)
	if len(blocks) != 1 {
		t.Fatalf("fs.read = %v", d)
	}
	b, _ := blocks[0].(map[string]any)
	if b["type"] != "image" || b["mimeType"] != "image/png" || b["data"] != base64.StdEncoding.EncodeToString(pic) || d["size"] != float64(len(pic)) {
		t.Fatalf("fs.read = %v", d)
	}
}
