package local_test

import (
	"context"
	"os"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// BenchmarkDataRead is the tree's share of a small-file read over either
// transport: walk /home/root/small.txt (from /home) one name at a time, open, read to
// EOF, close, with no transport at all.
func BenchmarkDataRead(b *testing.B) {
	k, root, _, _ := newKernel(b)
	ctx := context.Background()
	k.Call(ctx, &kernel.Caller{Identity: root}, "fs.write", &abi.FSWriteArgs{Path: "/home/root/small.txt", Content: string(make([]byte, 1024))})
	buf := make([]byte, 8192)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var d vfs.Dir = k.d.Node("home")
		var n vfs.Node
		for _, name := range []string{"root", "small.txt"} {
			var err error
			n, _, err = vfs.LookupAttr(ctx, d, root, name)
			if err != nil {
				b.Fatal(err)
			}
			d, _ = n.(vfs.Dir)
		}
		h, err := n.(vfs.File).Open(ctx, root, os.O_RDONLY)
		if err != nil {
			b.Fatal(err)
		}
		if m, _ := h.Read(ctx, buf, 0); m != 1024 {
			b.Fatal("short read")
		}
		h.Read(ctx, buf, 1024)
		h.Close(ctx)
	}
}

// BenchmarkDataWrite is the tree's share of writing 64 KiB to a file in
// 4 KiB pieces over either transport (open, 16 writes, close), with no
// transport at all (the same bytes again, so that the file stays 64 KiB);
// with a home quota each write costs an fstat more.
func BenchmarkDataWrite(b *testing.B) {
	for _, quota := range []string{"", "1G"} {
		name := "noquota"
		if quota != "" {
			name = "quota"
		}
		b.Run(name, func(b *testing.B) {
			k, root, _, _ := newKernel(b)
			ctx := context.Background()
			if quota != "" {
				k.Call(ctx, &kernel.Caller{Identity: root}, "sys.config.set", &abi.ConfigSetArgs{Key: "config/quota/home", Value: []byte(`"` + quota + `"`)})
			}
			k.Call(ctx, &kernel.Caller{Identity: root}, "fs.write", &abi.FSWriteArgs{Path: "/home/root/w.txt", Content: ""})
			n, _, err := vfs.LookupAttr(ctx, k.d.Node("home/root"), root, "w.txt")
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 4096)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				h, err := n.(vfs.File).Open(ctx, root, os.O_WRONLY)
				if err != nil {
					b.Fatal(err)
				}
				for off := int64(0); off < 64<<10; off += 4096 {
					if _, err := h.Write(ctx, buf, off); err != nil {
						b.Fatal(err)
					}
				}
				h.Close(ctx)
			}
		})
	}
}
