package ninep

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/9p")

// goldenDir holds T/R transcripts, one message a line in go9p's String form.
var goldenDir = filepath.Join("..", "testdata", "9p")

// transcriptLine renders one message: "> " for sent, "< " for received,
// with the data of Rread and Twrite appended.
func transcriptLine(dir string, fc proto.FCall) string {
	s := dir + " " + fc.String()
	switch m := fc.(type) {
	case *proto.RRead:
		s += fmt.Sprintf(" data: %q", m.Data)
	case *proto.TWrite:
		s += fmt.Sprintf(" data: %q", m.Data)
	}
	return s
}

// runTranscript sends each message over net.Pipe to ServeConn, waiting for
// each reply, and returns the transcript.
func runTranscript(t *testing.T, msgs []proto.FCall) string {
	t.Helper()
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}}
	cli, sc := net.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- srv.ServeConn(context.Background(), sc, vfs.Peer{Transport: "test", HostUID: -1, HostGID: -1})
	}()
	rc := newRaw(t, cli)
	var b strings.Builder
	for _, m := range msgs {
		fmt.Fprintln(&b, transcriptLine(">", m))
		r := rc.rpc(m)
		fmt.Fprintln(&b, transcriptLine("<", r))
	}
	cli.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeConn = %v", err)
		}
	case <-time.After(rpcTimeout):
		t.Fatal("ServeConn did not return")
	}
	return b.String()
}

func TestGolden(t *testing.T) {
	sessions := map[string][]proto.FCall{
		"session.txt": {
			tversion(8192, "9P2000"),
			tattach(1, 0, NOFID, "glenda"),
			twalk(2, 0, 1, "view"),
			topen(3, 1, proto.Oread),
			tread(4, 1, 0, 512),
			tread(5, 1, 6, 512),
			tclunk(6, 1),
			twalk(7, 0, 2, "nope"),
			twalk(8, 0, 2, "data", "nope"),
			twalk(9, 0, 2, "ctl"),
			topen(10, 2, proto.Owrite),
			twrite(11, 2, 0, "bad verb\n"),
			twrite(12, 2, 0, "fine\n"),
			tclunk(13, 2),
			tclunk(14, 0),
			tstat(15, 0),
		},
	}
	for name, msgs := range sessions {
		t.Run(name, func(t *testing.T) {
			got := runTranscript(t, msgs)
			file := filepath.Join(goldenDir, name)
			if *update {
				if err := os.MkdirAll(goldenDir, 0755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(got), 0644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Errorf("transcript differs from %s (run with -update to accept):\n--- got\n%s--- want\n%s", file, got, want)
			}
		})
	}
}

// FuzzConn feeds arbitrary bytes to ServeConn over net.Pipe: the server
// must neither panic nor hang.
func FuzzConn(f *testing.F) {
	var seed []byte
	for _, m := range []proto.FCall{
		tversion(8192, "9P2000"),
		tattach(1, 0, NOFID, "glenda"),
		twalk(2, 0, 1, "view"),
		topen(3, 1, proto.Oread),
		tread(4, 1, 0, 512),
		twalk(5, 0, 2, "data"),
		&proto.TCreate{Header: h(proto.Tcreate, 6), Fid: 2, Name: "f", Perm: 0644, Mode: 2},
		twrite(7, 2, 0, "hello"),
		tclunk(8, 1),
	} {
		seed = append(seed, m.Compose()...)
	}
	f.Add(seed)
	f.Add(append(tversion(8192, "9P2000").Compose(), 3, 0, 0, 0))
	f.Add(append(tversion(8192, "9P2000.L").Compose(), tattach(1, 0, NOFID, "x").Compose()...))

	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, MaxInflight: 16}
	f.Fuzz(func(t *testing.T, data []byte) {
		cli, sc := net.Pipe()
		done := make(chan error, 1)
		go func() {
			done <- srv.ServeConn(context.Background(), sc, vfs.Peer{Transport: "test", HostUID: -1, HostGID: -1})
		}()
		go io.Copy(io.Discard, cli)
		go func() {
			cli.Write(data)
			cli.Close()
		}()
		select {
		case <-done:
		case <-time.After(rpcTimeout):
			cli.Close()
			t.Fatal("ServeConn did not return")
		}
	})
}
