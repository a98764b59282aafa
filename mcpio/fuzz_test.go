package mcpio_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"gsvfs.dev/gsvfs/mcpio"
)

// nopWriter is a writer that keeps nothing.
type nopWriter struct{}

func (nopWriter) Write(b []byte) (int, error) { return len(b), nil }
func (nopWriter) Close() error                { return nil }

// FuzzRead: any bytes on the stream are read as messages until an error,
// never a panic or a hang; the limit holds.
func FuzzRead(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}` + "\n",
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"result":{}}]` + "\n",
		"[]\n", "[1]\n", "{not json\n", "\n\n  \n", `{"jsonrpc":"2.0","id":1,"result":{}}`, "\r\n", "[\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, _ := (&mcpio.Transport{Reader: io.NopCloser(bytes.NewReader(in)), Writer: nopWriter{}, MaxLine: 4096}).Connect(context.Background())
		defer c.Close()
		for range len(in) + 2 {
			if _, err := c.Read(context.Background()); err != nil {
				return
			}
		}
		t.Fatalf("more messages than bytes from %q", in)
	})
}
