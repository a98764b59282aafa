package ninep

import (
	"context"
	"encoding/binary"
	"errors"
	"math/rand"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/vfstest"
)

// rpcTimeout bounds every wait of these tests for something that must
// happen (a reply, a close): a guard against a hang that holds on a
// 2-core machine at load 10, never a measure of speed.
const rpcTimeout = time.Minute

// rawConn is a 9P client that sends frames built with go9p's Compose and
// collects every reply in order.
type rawConn struct {
	t  testing.TB
	nc net.Conn
	in chan proto.FCall // closed when the server closes the connection
}

func newRaw(t testing.TB, nc net.Conn) *rawConn {
	rc := &rawConn{t: t, nc: nc, in: make(chan proto.FCall, 8192)}
	go func() {
		defer close(rc.in)
		for {
			fc, err := proto.ParseCall(nc)
			if err != nil {
				return
			}
			rc.in <- fc
		}
	}()
	t.Cleanup(func() { nc.Close() })
	return rc
}

func dialRaw(t testing.TB, sock string) *rawConn {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	return newRaw(t, nc)
}

func (rc *rawConn) send(fc proto.FCall) {
	rc.t.Helper()
	rc.sendRaw(fc.Compose())
}

func (rc *rawConn) sendRaw(b []byte) {
	rc.t.Helper()
	if _, err := rc.nc.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

func (rc *rawConn) recv() proto.FCall {
	rc.t.Helper()
	select {
	case fc, ok := <-rc.in:
		if !ok {
			rc.t.Fatalf("connection closed")
		}
		return fc
	case <-time.After(rpcTimeout):
		rc.t.Fatalf("no reply within %v", rpcTimeout)
	}
	return nil
}

// rpc sends fc and returns the next reply, which must carry fc's tag.
func (rc *rawConn) rpc(fc proto.FCall) proto.FCall {
	rc.t.Helper()
	rc.send(fc)
	r := rc.recv()
	if r.GetTag() != fc.GetTag() {
		rc.t.Fatalf("%v: reply %v has the wrong tag", fc, r)
	}
	return r
}

// expectClosed waits for the server to close the connection.
func (rc *rawConn) expectClosed() {
	rc.t.Helper()
	deadline := time.After(rpcTimeout)
	for {
		select {
		case _, ok := <-rc.in:
			if !ok {
				return
			}
		case <-deadline:
			rc.t.Fatalf("connection not closed")
		}
	}
}

// setup negotiates msize and attaches fid 0 as glenda.
func (rc *rawConn) setup(msize uint32) {
	rc.t.Helper()
	if r, ok := rc.rpc(tversion(msize, "9P2000")).(*proto.TRVersion); !ok || r.Version != "9P2000" {
		rc.t.Fatalf("version: %v", r)
	}
	mustR[*proto.RAttach](rc.t, rc.rpc(tattach(1, 0, NOFID, "glenda")))
}

func mustR[T proto.FCall](t testing.TB, fc proto.FCall) T {
	t.Helper()
	r, ok := fc.(T)
	if !ok {
		var want T
		t.Fatalf("got %v, want %T", fc, want)
	}
	return r
}

func mustErr(t testing.TB, fc proto.FCall, text string) {
	t.Helper()
	r, ok := fc.(*proto.RError)
	if !ok || r.Ename != text {
		t.Fatalf("got %v, want rerror %q", fc, text)
	}
}

func h(typ uint8, tag uint16) proto.Header { return proto.Header{Type: typ, Tag: tag} }

func tversion(msize uint32, v string) *proto.TRVersion {
	return &proto.TRVersion{Header: h(proto.Tversion, NOTAG), Msize: msize, Version: v}
}
func tauth(tag uint16, afid uint32, uname string) *proto.TAuth {
	return &proto.TAuth{Header: h(proto.Tauth, tag), Afid: afid, Uname: uname}
}
func tattach(tag uint16, fid, afid uint32, uname string) *proto.TAttach {
	return &proto.TAttach{Header: h(proto.Tattach, tag), Fid: fid, Afid: afid, Uname: uname}
}
func twalk(tag uint16, fid, newfid uint32, names ...string) *proto.TWalk {
	return &proto.TWalk{Header: h(proto.Twalk, tag), Fid: fid, Newfid: newfid, Nwname: uint16(len(names)), Wname: names}
}
func topen(tag uint16, fid uint32, mode proto.Mode) *proto.TOpen {
	return &proto.TOpen{Header: h(proto.Topen, tag), Fid: fid, Mode: mode}
}
func tread(tag uint16, fid uint32, off uint64, count uint32) *proto.TRead {
	return &proto.TRead{Header: h(proto.Tread, tag), Fid: fid, Offset: off, Count: count}
}
func twrite(tag uint16, fid uint32, off uint64, data string) *proto.TWrite {
	return &proto.TWrite{Header: h(proto.Twrite, tag), Fid: fid, Offset: off, Count: uint32(len(data)), Data: []byte(data)}
}
func tclunk(tag uint16, fid uint32) *proto.TClunk {
	return &proto.TClunk{Header: h(proto.Tclunk, tag), Fid: fid}
}
func tstat(tag uint16, fid uint32) *proto.TStat {
	return &proto.TStat{Header: h(proto.Tstat, tag), Fid: fid}
}
func tflush(tag, oldtag uint16) *proto.TFlush {
	return &proto.TFlush{Header: h(proto.Tflush, tag), Oldtag: oldtag}
}

func rawServer(t *testing.T, srv *Server) (*testTree, string) {
	t.Helper()
	tt := newTestTree()
	srv.Root = tt.root
	if srv.Auth == nil {
		srv.Auth = testAuth{}
	}
	return tt, serveUnix(t, srv)
}

// Test 2: 1,000 blocked reads on one connection do not stop a second
// connection, and flushing them all yields 1,000 Rflushes, none before a
// reply to the same tag.
func TestThousandFlushes(t *testing.T) {
	for _, perFid := range []bool{true, false} {
		name := "one-fid"
		if perFid {
			name = "fid-per-read"
		}
		t.Run(name, func(t *testing.T) {
			tt, sock := rawServer(t, &Server{})
			rc := dialRaw(t, sock)
			rc.setup(8192)
			const N = 1000
			fidOf := func(i int) uint32 {
				if perFid {
					return uint32(i)
				}
				return 1
			}
			nfids := 1
			if perFid {
				nfids = N
			}
			for i := 1; i <= nfids; i++ {
				mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, uint32(i), "stream")))
				mustR[*proto.ROpen](t, rc.rpc(topen(1, uint32(i), proto.Oread)))
			}
			for i := 1; i <= N; i++ {
				rc.send(tread(uint16(i), fidOf(i), 0, 100))
			}
			// Requests are registered in the order they are read, so once
			// this is answered all the reads are outstanding.
			mustR[*proto.RStat](t, rc.rpc(tstat(5000, 0)))

			rc2 := dialRaw(t, sock)
			start := time.Now()
			rc2.setup(8192)
			mustR[*proto.RStat](t, rc2.rpc(tstat(1, 0)))
			if d := time.Since(start); d > rpcTimeout {
				t.Errorf("second connection took %v", d)
			}

			for i := 1; i <= N; i++ {
				rc.send(tflush(uint16(N+i), uint16(i)))
			}
			flushed := map[uint16]bool{}
			deadline := time.After(rpcTimeout)
			for len(flushed) < N {
				var fc proto.FCall
				select {
				case r, ok := <-rc.in:
					if !ok {
						t.Fatalf("connection closed after %d Rflush", len(flushed))
					}
					fc = r
				case <-deadline:
					t.Fatalf("only %d of %d Rflush arrived", len(flushed), N)
				}
				tag := fc.GetTag()
				switch {
				case tag >= 1 && tag <= N:
					if flushed[tag] {
						t.Errorf("reply %v after the Rflush for its tag", fc)
					}
					// The stream had no records: a cancelled read is not answered.
					t.Errorf("unexpected reply to a flushed read: %v", fc)
				case tag > N && tag <= 2*N:
					mustR[*proto.RFlush](t, fc)
					if flushed[tag-N] {
						t.Errorf("duplicate Rflush %v", fc)
					}
					flushed[tag-N] = true
				default:
					t.Errorf("unexpected message %v", fc)
				}
			}
			// Still serving; clunking releases every subscription.
			mustR[*proto.RStat](t, rc.rpc(tstat(1, 0)))
			for i := 1; i <= nfids; i++ {
				mustR[*proto.RClunk](t, rc.rpc(tclunk(1, uint32(i))))
			}
			if n := tt.subs.Load(); n != 0 {
				t.Errorf("%d subscriptions still open", n)
			}
		})
	}
}

// A request that succeeds despite its Tflush is answered, then flushed; a
// flush of an unknown tag is answered at once; a duplicate tag is refused
// without disturbing the original request.
func TestFlushOrder(t *testing.T) {
	_, sock := rawServer(t, &Server{})
	rc := dialRaw(t, sock)
	rc.setup(8192)
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 1, "late")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 1, proto.Oread)))
	rc.send(tread(11, 1, 0, 100))
	rc.send(tflush(12, 11))
	r := mustR[*proto.RRead](t, rc.recv())
	if r.Tag != 11 || string(r.Data) != "finished anyway\n" {
		t.Errorf("got %v %q, want the late read's reply", r, r.Data)
	}
	if f := mustR[*proto.RFlush](t, rc.recv()); f.Tag != 12 {
		t.Errorf("got %v, want rflush tag 12", f)
	}
	mustR[*proto.RFlush](t, rc.rpc(tflush(13, 999)))

	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 2, "stream")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 2, proto.Oread)))
	rc.send(tread(9, 2, 0, 100))
	mustErr(t, rc.rpc(tstat(9, 0)), "duplicate tag")
	rc.send(tflush(10, 9))
	if f := mustR[*proto.RFlush](t, rc.recv()); f.Tag != 10 {
		t.Errorf("got %v, want rflush tag 10", f)
	}
}

// With the budget spent, the connection is not read until a request
// finishes; a peer hanging up meanwhile ends the connection.
func TestBudget(t *testing.T) {
	tt := newTestTree()
	srv := &Server{Root: tt.root, Auth: testAuth{}, MaxInflight: 4}
	l := vfstest.ListenUnix(t)
	done := make(chan error, 1)
	go func() {
		sc, err := l.Accept()
		if err != nil {
			done <- err
			return
		}
		done <- srv.ServeConn(context.Background(), sc, ConnPeer(sc))
	}()
	rc := dialRaw(t, l.Addr().String())
	rc.setup(8192)
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 1, "stream")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 1, proto.Oread)))
	for i := 1; i <= 4; i++ {
		rc.send(tread(uint16(i), 1, 0, 100))
	}
	rc.send(tstat(10, 0))
	select {
	case fc := <-rc.in:
		t.Fatalf("got %v while the budget was spent", fc)
	case <-time.After(200 * time.Millisecond):
	}
	tt.feed <- []byte("record\n")
	r := mustR[*proto.RRead](t, rc.recv())
	if string(r.Data) != "record\n" || r.Tag < 1 || r.Tag > 4 {
		t.Errorf("got %v %q", r, r.Data)
	}
	if s := mustR[*proto.RStat](t, rc.recv()); s.Tag != 10 {
		t.Errorf("got %v, want rstat tag 10", s)
	}
	rc.send(tread(r.Tag, 1, 0, 100)) // spend the budget again
	time.Sleep(50 * time.Millisecond)
	rc.nc.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeConn = %v, want nil after hang-up", err)
		}
	case <-time.After(rpcTimeout):
		t.Fatal("ServeConn did not notice the hang-up")
	}
	if n := tt.subs.Load(); n != 0 {
		t.Errorf("%d subscriptions still open", n)
	}
}

// Test 3: version negotiation and session reset.
func TestVersion(t *testing.T) {
	tt, sock := rawServer(t, &Server{})
	rc := dialRaw(t, sock)
	for _, v := range []string{"9P2000.L", "9P2000.u", "9P1", ""} {
		r := mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, v)))
		if r.Type != proto.Rversion || r.Version != "unknown" {
			t.Errorf("Tversion %q: got %v, want version unknown", v, r)
		}
	}
	mustErr(t, rc.rpc(tattach(1, 0, NOFID, "glenda")), "9P version not negotiated")
	mustErr(t, rc.rpc(tversion(100, "9P2000")), "msize too small")
	r := mustR[*proto.TRVersion](t, rc.rpc(tversion(1<<20, "9P2000")))
	if r.Version != "9P2000" || r.Msize != MaxMsize || r.Tag != NOTAG {
		t.Errorf("got %v, want 9P2000 msize %d", r, MaxMsize)
	}

	// Tversion aborts outstanding requests and clunks every fid.
	mustR[*proto.RAttach](t, rc.rpc(tattach(1, 0, NOFID, "glenda")))
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 1, "stream")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 1, proto.Oread)))
	rc.send(tread(7, 1, 0, 100))
	r = mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, "9P2000")))
	if r.Msize != 8192 {
		t.Errorf("got %v, want msize 8192", r)
	}
	if n := tt.subs.Load(); n != 0 {
		t.Errorf("%d subscriptions open after Tversion", n)
	}
	mustErr(t, rc.rpc(tstat(1, 0)), "unknown fid")
	// A frame larger than the new msize closes the connection.
	big := twrite(1, 0, 0, string(make([]byte, 8192)))
	rc.send(big)
	rc.expectClosed()
}

// Test 4: malformed input closes only its own connection.
func TestGarbage(t *testing.T) {
	_, sock := rawServer(t, &Server{})
	good := dialRaw(t, sock)
	good.setup(8192)

	patch := func(b []byte, off int, v uint32, n int) []byte {
		if n == 2 {
			binary.LittleEndian.PutUint16(b[off:], uint16(v))
		} else {
			binary.LittleEndian.PutUint32(b[off:], v)
		}
		return b
	}
	frame := func(typ uint8, body ...byte) []byte {
		b := make([]byte, 7, 7+len(body))
		binary.LittleEndian.PutUint32(b, uint32(7+len(body)))
		b[4] = typ
		return append(b, body...)
	}
	rnd := make([]byte, 4096)
	rand.New(rand.NewSource(1)).Read(rnd)
	trailing := append(tclunk(1, 0).Compose(), 0, 0)
	patch(trailing, 0, uint32(len(trailing)), 4)

	cases := []struct {
		name  string
		setup bool
		data  []byte
	}{
		{"size 3 before version", false, []byte{3, 0, 0, 0}},
		{"size 3", true, []byte{3, 0, 0, 0}},
		{"size 0", true, []byte{0, 0, 0, 0}},
		{"size 0xFFFFFFFF", true, []byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4}},
		{"size over msize", true, patch(make([]byte, 8), 0, 8193, 4)},
		{"twrite count over body", true, patch(twrite(1, 0, 0, "abc").Compose(), 19, 1000, 4)},
		{"twrite count under body", true, patch(twrite(1, 0, 0, "abc").Compose(), 19, 1, 4)},
		{"twrite short header", true, frame(proto.Twrite, 0, 0, 0, 0)},
		{"truncated string", true, patch(tattach(1, 5, NOFID, "glenda").Compose(), 15, 200, 2)},
		{"short string length", true, patch(tattach(1, 5, NOFID, "glenda").Compose(), 15, 2, 2)},
		{"short tcreate", true, frame(proto.Tcreate, 0, 0, 0, 0, 0, 0)},
		{"twalk missing names", true, patch(twalk(1, 0, 1, "view").Compose(), 15, 5, 2)},
		{"trailing bytes", true, trailing},
		{"r-message", true, (&proto.RFlush{Header: h(proto.Rflush, 1)}).Compose()},
		{"terror", true, frame(proto.Terror)},
		{"unknown type", true, frame(200, 1, 2, 3)},
		{"random", true, rnd},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialRaw(t, sock)
			if tc.setup {
				rc.setup(8192)
			}
			rc.nc.Write(tc.data) // the server may close before reading it all
			rc.expectClosed()
			mustR[*proto.RStat](t, good.rpc(tstat(1, 0)))
		})
	}
}

// Test 6 and friends: fid misuse and other per-request errors.
func TestFidErrors(t *testing.T) {
	_, sock := rawServer(t, &Server{})
	rc := dialRaw(t, sock)
	rc.setup(8192)
	rpc := rc.rpc

	mustErr(t, rpc(tattach(1, 0, NOFID, "glenda")), "fid in use")
	mustR[*proto.RWalk](t, rpc(twalk(1, 0, 1)))
	mustErr(t, rpc(twalk(1, 0, 1)), "fid in use")
	mustErr(t, rpc(tauth(1, 1, "glenda")), "fid in use")
	mustErr(t, rpc(tstat(1, 99)), "unknown fid")
	mustErr(t, rpc(tclunk(1, 99)), "unknown fid")
	mustErr(t, rpc(twalk(1, 99, 2, "view")), "unknown fid")
	mustErr(t, rpc(topen(1, 99, proto.Oread)), "unknown fid")
	mustErr(t, rpc(tread(1, 99, 0, 10)), "unknown fid")
	mustErr(t, rpc(twrite(1, 99, 0, "x")), "unknown fid")
	mustR[*proto.RClunk](t, rpc(tclunk(1, 1)))
	mustErr(t, rpc(tclunk(1, 1)), "unknown fid")

	// Walks: partial, failing at the first name, "..", too long, non-dir.
	w := mustR[*proto.RWalk](t, rpc(twalk(1, 0, 2, "data", "nope", "x")))
	if w.Nwqid != 1 || w.Wqid[0].Qtype != qtDir {
		t.Errorf("partial walk = %v", w)
	}
	mustErr(t, rpc(tstat(1, 2)), "unknown fid")
	mustErr(t, rpc(twalk(1, 0, 2, "nope")), "file does not exist")
	mustErr(t, rpc(twalk(1, 0, 2, "a/b")), "invalid file name")
	root := mustR[*proto.RStat](t, rpc(tstat(1, 0)))
	w = mustR[*proto.RWalk](t, rpc(twalk(1, 0, 2, "..", "..")))
	if w.Nwqid != 2 || w.Wqid[1] != root.Stat.Qid {
		t.Errorf("walk .. = %v, want root qid %v", w, root.Stat.Qid)
	}
	w = mustR[*proto.RWalk](t, rpc(twalk(1, 2, 2, "data", "..", "view")))
	if w.Nwqid != 3 || w.Wqid[2].Uid != vfs.PathIno("/view") {
		t.Errorf("walk data/../view = %v", w)
	}
	if s := mustR[*proto.RStat](t, rpc(tstat(1, 2))); s.Stat.Name != "view" {
		t.Errorf("fid moved by newfid==fid walk: %v", s)
	}
	names := make([]string, 17)
	for i := range names {
		names[i] = ".."
	}
	mustErr(t, rpc(twalk(1, 0, 3, names...)), "too many names in walk")
	mustErr(t, rpc(twalk(1, 2, 3, "x")), "walk in non-directory")

	// Opens.
	mustR[*proto.ROpen](t, rpc(topen(1, 2, proto.Oread)))
	mustErr(t, rpc(topen(1, 2, proto.Oread)), "fid already open")
	mustErr(t, rpc(twalk(1, 2, 3)), "cannot walk an open fid")
	mustErr(t, rpc(twrite(1, 2, 0, "x")), "fid not open for writing")
	mustR[*proto.RWalk](t, rpc(twalk(1, 0, 3, "view")))
	mustErr(t, rpc(tread(1, 3, 0, 10)), "fid not open")
	mustErr(t, rpc(twrite(1, 3, 0, "x")), "fid not open")
	mustErr(t, rpc(topen(1, 3, proto.Oread|proto.Orclose)), "ORCLOSE not supported")
	mustErr(t, rpc(topen(1, 3, proto.Owrite)), "file is read-only")
	mustR[*proto.RWalk](t, rpc(twalk(1, 0, 4)))
	mustErr(t, rpc(topen(1, 4, proto.Owrite)), "is a directory")

	// Directory reads: whole entries, offsets continue or restart at 0.
	mustR[*proto.ROpen](t, rpc(topen(1, 4, proto.Oread)))
	mustErr(t, rpc(tread(1, 4, 0, 10)), "read count too small for directory entry")
	mustErr(t, rpc(tread(1, 4, 12345, 8000)), "bad offset in directory read")
	r := mustR[*proto.RRead](t, rpc(tread(1, 4, 0, 120)))
	st, err := proto.ParseStats(r.Data)
	if err != nil || len(st) != 1 || st[0].Name != "call" {
		t.Fatalf("first dir read = %v, %v", st, err)
	}
	off := uint64(r.Count)
	var all []string
	for {
		r := mustR[*proto.RRead](t, rpc(tread(1, 4, off, 8000)))
		if r.Count == 0 {
			break
		}
		st, err := proto.ParseStats(r.Data)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range st {
			all = append(all, s.Name)
		}
		off += uint64(r.Count)
	}
	if len(all) != 7 || all[0] != "ctl" {
		t.Errorf("rest of listing = %v", all)
	}
	r = mustR[*proto.RRead](t, rpc(tread(1, 4, 0, 8000)))
	if st, _ := proto.ParseStats(r.Data); len(st) != 8 {
		t.Errorf("re-read at offset 0 gave %d entries", len(st))
	}

	// Creating needs a vfs.Creator.
	mustR[*proto.RWalk](t, rpc(twalk(1, 0, 5)))
	mustErr(t, rpc(&proto.TCreate{Header: h(proto.Tcreate, 1), Fid: 5, Name: "x", Perm: 0644, Mode: 0}), "operation not supported")
	mustErr(t, rpc(&proto.TCreate{Header: h(proto.Tcreate, 1), Fid: 5, Name: "..", Perm: 0644}), "invalid file name")
	mustErr(t, rpc(&proto.TRemove{Header: h(proto.Tremove, 1), Fid: 5}), "cannot remove the root")
	mustErr(t, rpc(tstat(1, 5)), "unknown fid") // remove clunked it
}

func TestAuthFid(t *testing.T) {
	_, sock := rawServer(t, &Server{})
	rc := dialRaw(t, sock)
	mustR[*proto.TRVersion](t, rc.rpc(tversion(8192, "9P2000")))
	a := mustR[*proto.RAuth](t, rc.rpc(tauth(1, 10, "glenda")))
	if a.Aqid.Qtype != qtAuth {
		t.Errorf("aqid = %v", a.Aqid)
	}
	mustR[*proto.RWrite](t, rc.rpc(twrite(1, 10, 0, "good-")))
	mustR[*proto.RWrite](t, rc.rpc(twrite(1, 10, 0, "token")))
	if r := mustR[*proto.RRead](t, rc.rpc(tread(1, 10, 0, 100))); r.Count != 0 {
		t.Errorf("auth fid read = %v", r)
	}
	mustErr(t, rc.rpc(twalk(1, 10, 11)), "not allowed on an auth fid")
	mustR[*proto.RAuth](t, rc.rpc(tauth(1, 20, "glenda")))
	mustR[*proto.RWrite](t, rc.rpc(twrite(1, 20, 0, string(make([]byte, 8000)))))
	mustErr(t, rc.rpc(twrite(1, 20, 0, string(make([]byte, maxSecret-7999)))), "auth secret too long")
	mustR[*proto.RClunk](t, rc.rpc(tclunk(1, 20)))
	mustErr(t, rc.rpc(tattach(1, 11, 10, "other")), "attach does not match auth fid")
	mustErr(t, rc.rpc(tattach(1, 11, 12, "glenda")), "unknown fid")
	mustR[*proto.RAttach](t, rc.rpc(tattach(1, 11, 10, "glenda")))
	mustErr(t, rc.rpc(tattach(1, 12, 11, "glenda")), "afid is not an auth fid")
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 11, 12, "whoami")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 12, proto.Oread)))
	r := mustR[*proto.RRead](t, rc.rpc(tread(1, 12, 0, 200)))
	if want := "glenda 9p-unix"; len(r.Data) < len(want) || string(r.Data[:len(want)]) != want {
		t.Errorf("whoami = %q", r.Data)
	}
}

// panicOpen is a file whose Open panics the first time.
type panicOpen struct {
	allow
	n atomic.Int32
}

func (p *panicOpen) Open(ctx context.Context, cred vfs.Cred, flags int) (vfs.Handle, error) {
	if p.n.Add(1) == 1 {
		panic("open boom")
	}
	return funcHandle{&funcFile{read: func(ctx context.Context, b []byte) (int, error) { return copy(b, "ok"), nil }}}, nil
}

// A panicking Open is an Rerror and leaves the fid openable.
func TestPanicOpen(t *testing.T) {
	root := vfs.NewDir(allow{"/", true}, vfs.DirEntry{Name: "p", Node: &panicOpen{allow: allow{path: "/p"}}})
	rc := dialRaw(t, serveUnix(t, &Server{Root: root}))
	rc.setup(8192)
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 1, "p")))
	mustErr(t, rc.rpc(topen(1, 1, proto.Oread)), "internal server error")
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 1, proto.Oread)))
	if r := mustR[*proto.RRead](t, rc.rpc(tread(1, 1, 0, 10))); string(r.Data) != "ok" {
		t.Errorf("read = %q", r.Data)
	}
}

// Tclunk of a fid with a read in flight answers at once; the handle is
// closed when the read ends.
func TestClunkWhileReading(t *testing.T) {
	tt, sock := rawServer(t, &Server{})
	rc := dialRaw(t, sock)
	rc.setup(8192)
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 1, "stream")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 1, proto.Oread)))
	rc.send(tread(2, 1, 0, 100))
	// Requests run concurrently: wait until the read is blocked in the
	// stream before clunking its fid.
	for deadline := time.Now().Add(rpcTimeout); tt.waiting.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the read never blocked")
		}
	}
	mustR[*proto.RClunk](t, rc.rpc(tclunk(3, 1)))
	if n := tt.subs.Load(); n != 1 {
		t.Errorf("%d subscriptions open while the read is in flight, want 1", n)
	}
	mustErr(t, rc.rpc(tstat(4, 1)), "unknown fid")
	mustR[*proto.RFlush](t, rc.rpc(tflush(5, 2)))
	if n := tt.subs.Load(); n != 0 {
		t.Errorf("%d subscriptions open after the read ended", n)
	}
}

// A ctl line still pending at Tclunk runs then; its error is the Rclunk's
// error, and the fid is clunked all the same.
func TestClunkFlushError(t *testing.T) {
	_, sock := rawServer(t, &Server{})
	rc := dialRaw(t, sock)
	rc.setup(MaxMsize)
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 1, "ctl")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 1, proto.Owrite)))
	mustR[*proto.RWrite](t, rc.rpc(twrite(1, 1, 0, "bad")))
	mustErr(t, rc.rpc(tclunk(1, 1)), "unknown verb: bad")
	mustErr(t, rc.rpc(tclunk(1, 1)), "unknown fid")
}

// Cancelling Serve's context ends connections with requests in flight.
func TestServeShutdown(t *testing.T) {
	tt := newTestTree()
	l := vfstest.ListenUnix(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{Root: tt.root}).Serve(ctx, l, nil) }()
	rc := dialRaw(t, l.Addr().String())
	rc.setup(8192)
	mustR[*proto.RWalk](t, rc.rpc(twalk(1, 0, 1, "stream")))
	mustR[*proto.ROpen](t, rc.rpc(topen(1, 1, proto.Oread)))
	rc.send(tread(2, 1, 0, 100))
	mustR[*proto.RStat](t, rc.rpc(tstat(3, 0)))
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(rpcTimeout):
		t.Fatal("Serve did not return")
	}
	rc.expectClosed()
	if n := tt.subs.Load(); n != 0 {
		t.Errorf("%d subscriptions open after shutdown", n)
	}
}

// A fid's number may be used again by the request that follows its
// Tclunk (or Tremove), before the Rclunk: the connection takes the fid
// out of its table as the message arrives, in order.
func TestFidReusedAfterClunk(t *testing.T) {
	_, sock := rawServer(t, &Server{})
	rc := dialRaw(t, sock)
	rc.setup(8192)
	for i := 0; i < 200; i++ {
		mustR[*proto.RWalk](t, rc.rpc(twalk(2, 0, 7)))
		rc.send(tclunk(3, 7))
		rc.send(twalk(4, 0, 7)) // pipelined: no wait for the Rclunk
		got := map[uint16]proto.FCall{}
		for len(got) < 2 {
			fc := rc.recv()
			got[fc.GetTag()] = fc
		}
		mustR[*proto.RClunk](t, got[3])
		mustR[*proto.RWalk](t, got[4])
		mustR[*proto.RClunk](t, rc.rpc(tclunk(5, 7)))
	}
}
