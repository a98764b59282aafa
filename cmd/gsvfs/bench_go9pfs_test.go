// Code copied from github.com/knusbaum/go9p@v1.18.0/fs (filesystem.go,
// server.go, static.go, permissions.go) as BenchmarkNinePSmallRead's
// baseline. It is upstream's code with these changes, none of which alters
// what the server does when no authentication is configured:
//
//   - identifiers are prefixed with g9 (this is package main);
//   - Plan9Auth and PlainAuth are dropped and server.Auth keeps only its
//     no-authentication branch: they need github.com/Plan9-Archive/libauth
//     and github.com/emersion/go-sasl, whose sources are not in the module
//     cache (go.sum has no h1: line for them either), so the upstream
//     package cannot be compiled here;
//   - gofmt'd, with keyed proto struct literals and without the dead
//     "break" and "return false" statements after returns, so that go vet
//     is clean.
//
// The server is still run by go9p's own connection loop
// (go9p.ServeReadWriter, as go9p.Serve does), so the baseline is go9p's
// server as a user of its fs package would get it.
//
// Upstream's licence:
//
// MIT License
//
// Copyright (c) 2016 Kyle Nusbaum
//
// Permission is hereby granted, free of charge, to any person obtaining a copy
// of this software and associated documentation files (the "Software"), to deal
// in the Software without restriction, including without limitation the rights
// to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
// copies of the Software, and to permit persons to whom the Software is
// furnished to do so, subject to the following conditions:
//
// The above copyright notice and this permission notice shall be included in all
// copies or substantial portions of the Software.
//
// THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
// IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
// FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
// AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
// LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
// OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
// SOFTWARE.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/knusbaum/go9p"
	"github.com/knusbaum/go9p/proto"
)

// g9FSNode represents a node in a g9FS tree. It should track its
// Parent, which should be the g9Dir that the g9FSNode belongs to.
// SetParent should not be called directly. Instead, use the
// AddChild and DeleteChild functions on a g9Dir to add, remove,
// and move FSNodes around a filesystem.
type g9FSNode interface {
	Stat() proto.Stat
	WriteStat(s *proto.Stat) error
	SetParent(d g9Dir)
	Parent() g9Dir
}

// g9File represents a leaf node in the g9FS tree. It must implement
// Open, Read, Write, and Close methods. fid is a unique number
// representing an open file descriptor to the file.
// For each fid, Open will be called before Read, Write, or Close,
// and should open a file in the given omode, or return an error.
// If Open returns an error, fid is not valid. Following a
// successful Open, a given fid represents the same file descriptor
// until Close is called. Read requests count bytes at offset in the
// file, for file descriptor fid. Similarly, Write should write data
// into the file from file descriptor fid at offset.
// Both Read and Write may return error, which will be sent back to
// the client in a proto.TError message.
//
// See g9StaticFile for a simple g9File implementation.
type g9File interface {
	g9FSNode
	Open(fid uint64, omode proto.Mode) error
	Read(fid uint64, offset uint64, count uint64) ([]byte, error)
	Write(fid uint64, offset uint64, data []byte) (uint32, error)
	Close(fid uint64) error
}

// g9Dir represents a directory within the Filesystem.
type g9Dir interface {
	g9FSNode
	Children() map[string]g9FSNode
}

// g9ModDir is a directory that allows the adding and removal of child nodes.
type g9ModDir interface {
	g9Dir
	AddChild(n g9FSNode) error
	DeleteChild(name string) error
}

// g9FullPath is a helper function that assembles the names
// of all the parent nodes of f into a full path string.
func g9FullPath(f g9FSNode) string {
	if f == nil {
		return ""
	}
	parent := f.Parent()
	if parent == nil {
		return f.Stat().Name
	}
	fp := g9FullPath(parent)
	return strings.Replace(fp+"/"+f.Stat().Name, "//", "/", -1)
}

// g9BaseNode provides a basic g9FSNode. It is intended to be embedded in other structures implementing
// either the g9File or g9Dir interfaces.
type g9BaseNode struct {
	FStat   proto.Stat
	FParent g9Dir
}

func (n *g9BaseNode) Stat() proto.Stat {
	return n.FStat
}

func (n *g9BaseNode) WriteStat(s *proto.Stat) error {
	return errors.New("Attributes are read only")
}

func (n *g9BaseNode) SetParent(d g9Dir) {
}

func (n *g9BaseNode) Parent() g9Dir {
	return n.FParent
}

func g9NewBaseNode(fs *g9FS, parent g9Dir, name, uid, gid string, mode uint32) g9BaseNode {
	return g9BaseNode{
		FStat:   *fs.NewStat(name, uid, gid, mode),
		FParent: parent,
	}
}

// g9BaseFile provides a simple g9File implementation that other implementations
// can base themselves off of. On its own it's not too useful. Stat and
// WriteStat work as expected, as do Parent and SetParent. Open always
// succeeds. Read always returns a zero-byte slice, Write always fails, and
// Close always succeeds.
//
// Note, g9BaseFile is most useful when you want to create a custom g9File type
// rather than creating a single special file. Most of the time, you may
// want to use WrappedFile for custom behavior.
type g9BaseFile struct {
	fStat  proto.Stat
	parent g9Dir
	sync.RWMutex
}

func g9NewBaseFile(s *proto.Stat) *g9BaseFile {
	return &g9BaseFile{fStat: *s}
}

func (f *g9BaseFile) Stat() proto.Stat {
	return f.fStat
}

func (f *g9BaseFile) WriteStat(s *proto.Stat) error {
	f.Lock()
	defer f.Unlock()
	f.fStat = *s
	return nil
}

func (f *g9BaseFile) SetParent(p g9Dir) {
	f.Lock()
	defer f.Unlock()
	f.parent = p
}

func (f *g9BaseFile) Parent() g9Dir {
	f.RLock()
	defer f.RUnlock()
	return f.parent
}

// Open always succeeds.
func (f *g9BaseFile) Open(fid uint64, omode proto.Mode) error {
	return nil
}

// Read always returns an empty slice.
func (f *g9BaseFile) Read(fid uint64, offset uint64, count uint64) ([]byte, error) {
	return []byte{}, nil
}

// Write always fails with an error.
func (f *g9BaseFile) Write(fid uint64, offset uint64, data []byte) (uint32, error) {
	return 0, fmt.Errorf("Cannot write to file.")
}

// Close always succeeds.
func (f *g9BaseFile) Close(fid uint64) error {
	return nil
}

// The g9FS structure represents a hierarchical filesystem tree.
// It must contain a Root g9Dir, but all of the function members are
// optional. If provided, CreateFile is called when a client attempts
// to create a file. Similarly, CreateDir is called when a client attempts
// to create a directory. WalkFail's usefulness is dubious, but is called
// when a client walks to a path that does not exist in the fs. It can be used
// to create files on the fly. CreateFile returns a g9File, CreateDir returns a
// g9Dir, and WalkFail should return either a g9File or a g9Dir. All three can return
// an error, in which case the Error() will be returned to the client in a
// proto.TError. nil, nil is also an appropriate return pair, in which case a
// proto.TError with a generic message will be returned to the client.
//
// g9FS is a tree structure. Every internal node should be a g9Dir - only
// instances of g9Dir can have children. Instances of g9File can only be leaves of
// the tree.
type g9FS struct {
	Root        g9Dir
	CreateFile  func(fs *g9FS, parent g9Dir, user, name string, perm uint32, mode uint8) (g9File, error)
	CreateDir   func(fs *g9FS, parent g9Dir, user, name string, perm uint32, mode uint8) (g9Dir, error)
	WalkFail    func(fs *g9FS, parent g9Dir, name string) (g9FSNode, error)
	RemoveFile  func(fs *g9FS, f g9FSNode) error
	uid         uint64 // uid for generating Qids.
	ignorePerms bool   // When true, the g9server will ignore user/group permissions
	// doAuth bool
	authFunc func(s io.ReadWriter) (string, error)
	sync.RWMutex
}

// g9NewFS constructs and returns an *g9FS. Options may be passed to do things
// like setting the various hook functions.
func g9NewFS(rootUser, rootGroup string, rootPerms uint32, opts ...g9Option) (*g9FS, *g9StaticDir) {
	var fs g9FS
	d := g9NewStaticDir(fs.NewStat("/", rootUser, rootGroup, rootPerms|proto.DMDIR))
	fs.Root = d
	for _, o := range opts {
		o(&fs)
	}
	return &fs, d
}

// NewQid generates a new, unique proto.Qid for use in a new file.
// Each file in the g9FS should have a unique proto.Qid. statMode
// should come from the file's Stat().Mode
func (fs *g9FS) NewQid(statMode uint32) proto.Qid {
	fs.Lock()
	defer fs.Unlock()
	uid := fs.uid
	fs.uid = fs.uid + 1
	return proto.Qid{
		Qtype: uint8(statMode >> 24),
		Vers:  0,
		Uid:   uid,
	}
}

// NewStat creates and returns a new proto.Stat object for use with a
// g9FSNode. name will be the name of the node, and it will be owned by
// user uid and group gid. mode is standard unix permissions bits, along
// with any special mode bits (e.g. proto.DMDIR for directories)
func (fs *g9FS) NewStat(name, uid, gid string, mode uint32) *proto.Stat {
	return &proto.Stat{
		Type:   0,
		Dev:    0,
		Qid:    fs.NewQid(mode),
		Mode:   mode,
		Atime:  uint32(time.Now().Unix()),
		Mtime:  uint32(time.Now().Unix()),
		Length: 0,
		Name:   name,
		Uid:    uid,
		Gid:    gid,
		Muid:   uid,
	}
}

// g9RMFile is a function intended to be used with the g9WithRemoveFile g9Option.
// g9RMFile simply enables the deletion of files and directories on the
// g9FS subject to usual permissions checks.
func g9RMFile(fs *g9FS, f g9FSNode) error {
	parent, ok := f.Parent().(g9ModDir)
	if !ok {
		return fmt.Errorf("%s does not support modification.", g9FullPath(f.Parent()))
	}
	return parent.DeleteChild(f.Stat().Name)
}

// Options are used to configure an g9FS with g9NewFS
type g9Option func(*g9FS)

// g9WithCreateFile configures a function to be called when a client attempts
// to create a file on the g9FS. The function f, if successful, should return
// a g9File, which it should add to the parent g9Dir. If a file should not be
// created, f can return an error which will be sent to the client.
// Basic permissions checking is done by the g9FS before calling f, but any
// other checking can be done by f.
func g9WithCreateFile(f func(fs *g9FS, parent g9Dir, user, name string, perm uint32, mode uint8) (g9File, error)) g9Option {
	return func(fs *g9FS) {
		fs.CreateFile = f
	}
}

// g9WithCreateDir configures a function to be called when a client attempts
// to create a directory on the g9FS. The function f, if successful, should return
// a g9Dir, which it should add to the parent g9Dir. If a file should not be
// created, f can return an error which will be sent to the client.
// Basic permissions checking is done by the g9FS before calling f, but any
// other checking can be done by f.
func g9WithCreateDir(f func(fs *g9FS, parent g9Dir, user, name string, perm uint32, mode uint8) (g9Dir, error)) g9Option {
	return func(fs *g9FS) {
		fs.CreateDir = f
	}
}

// g9WithRemoveFile configures a function to be called when a client attempts
// to remove a file or directory from the g9FS. The function f, if successful,
// should remove the g9FSNode from its parent g9Dir, and return nil. If f does
// not choose to remove the g9FSNode, it should return an error, which will
// be sent to the client.
func g9WithRemoveFile(f func(fs *g9FS, f g9FSNode) error) g9Option {
	return func(fs *g9FS) {
		fs.RemoveFile = f
	}
}

// g9WithWalkFailHandler configures a function to be called when a client attempts
// to walk a path on the g9FS that does not exist. The function f may decide
// to create a g9File or Directory on the fly, which should be returned.
// If f chooses not to create an g9FSNode to satisfy the walk, an error
// may be returned which will be sent to the client.
func g9WithWalkFailHandler(f func(fs *g9FS, parent g9Dir, name string) (g9FSNode, error)) g9Option {
	return func(fs *g9FS) {
		fs.WalkFail = f
	}
}

// g9WithAuth configures the g9server to require authentication.
// Authentication is performed using the standard plan9 or plan9port tools.
// A factotum must be running in the same namespace as this g9server in order
// to authenticate users. Please see http://man.cat-v.org/9front/4/factotum
// for more information.
func g9WithAuth(authFunc func(s io.ReadWriter) (string, error)) g9Option {
	return func(fs *g9FS) {
		fs.authFunc = authFunc
	}
}

// g9IgnorePermissions configures the g9server to not enforce user/group permissions bits. This is
// useful, for instance, when permissions need to be enforced at a higher level, or by an
// underlying file system that is being exported by the g9server.
func g9IgnorePermissions() g9Option {
	return func(fs *g9FS) {
		fs.ignorePerms = true
	}
}

// Generic SASL authentication
//func SaslAuth(s io.ReadWriter) (string, error) {
//
//}

type g9fidInfo struct {
	n          g9FSNode
	openMode   proto.Mode
	openOffset uint64
	uname      string // uname inherited during walk.
	extra      interface{}
}

func g9newFidInfo(uname string, n g9FSNode) *g9fidInfo {
	return &g9fidInfo{
		n:        n,
		openMode: proto.None,
		uname:    uname,
	}
}

func (i *g9fidInfo) deriveInfo(n g9FSNode) *g9fidInfo {
	return &g9fidInfo{
		n:        n,
		openMode: proto.None,
		uname:    i.uname,
	}
}

type g9conn struct {
	connID uint32
	fids   sync.Map
	tags   sync.Map
	msize  uint32
}

type g9ctxCancel struct {
	ctx    context.Context
	cancel context.CancelFunc
}

func (c *g9conn) toConnFid(fid uint32) uint64 {
	bcid := uint64(c.connID)
	bcid = bcid << 32
	bcid = bcid | uint64(fid)
	return bcid
}

func (c *g9conn) TagContext(tag uint16) context.Context {
	v, ok := c.tags.Load(tag)
	if !ok {
		ctx, cancel := context.WithCancel(context.Background())
		ctxc := &g9ctxCancel{ctx, cancel}
		c.tags.Store(tag, ctxc)
		return ctx
	}
	ctxc := v.(*g9ctxCancel)
	return ctxc.ctx
}

func (c *g9conn) DropContext(tag uint16) {
	v, ok := c.tags.Load(tag)
	if !ok {
		return
	}
	ctxc := v.(*g9ctxCancel)
	c.tags.Delete(tag)
	ctxc.cancel()
}

type g9server struct {
	fs         *g9FS
	currConnId uint32
}

// Server returns a go9p.Srv instance which will
// serve the 9p2000 protocol.
func (fs *g9FS) Server() go9p.Srv {
	return &g9server{fs: fs}
}

func (s *g9server) NewConn() go9p.Conn {
	s.currConnId += 1
	return &g9conn{connID: s.currConnId}
}

func (_ *g9server) Version(gc go9p.Conn, t *proto.TRVersion) (proto.FCall, error) {
	var reply proto.TRVersion
	if t.Type == proto.Tversion && t.Version == "9P2000" {
		if t.Msize > proto.MaxMsgLen {
			t.Msize = proto.MaxMsgLen
		}
		gc.(*g9conn).msize = t.Msize
		reply = *t
		reply.Type = proto.Rversion
		return &reply, nil
	} else {
		return nil, fmt.Errorf("Cannot reply to type %d\n", t.Type)
	}
}

func (s *g9server) Auth(gc go9p.Conn, t *proto.TAuth) (proto.FCall, error) {
	// [bench copy] upstream serves an auth stream file when fs.authFunc is
	// set; it never is here, so only the upstream's nil-authFunc branch is kept.
	return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Authentication Not Supported."}, nil
}

func (s *g9server) Attach(gc go9p.Conn, t *proto.TAttach) (proto.FCall, error) {
	c := gc.(*g9conn)

	if s.fs.authFunc == nil {
		log.Printf("%s attached", t.Uname)
		c.fids.Store(t.Fid, g9newFidInfo(t.Uname, s.fs.Root))
		return &proto.RAttach{Header: proto.Header{Type: proto.Rattach, Tag: t.Tag}, Qid: s.fs.Root.Stat().Qid}, nil
	}

	log.Printf("Loading info from C: %p, t.Afid: %d\n", c, t.Afid)
	i, ok := c.fids.Load(t.Afid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Not Authenticated."}, nil
	}
	info := i.(*g9fidInfo)
	if err, ok := info.extra.(error); ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
	}

	authName, ok := info.extra.(string)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Not Authenticated."}, nil
	}
	// TODO: For some reason, these don't seem to need to match.
	// User is authenticated as ai.Cuid, *not* necessarily as t.Uname.
	//	if t.Uname != ai.Cuid {
	//		return &proto.RError{Header: proto.Header{Type: t.Type, Tag: t.Tag}, Ename: "Bad attach uname"}, nil
	//	}
	c.fids.Store(t.Fid, g9newFidInfo(authName, s.fs.Root))
	return &proto.RAttach{Header: proto.Header{Type: proto.Rattach, Tag: t.Tag}, Qid: s.fs.Root.Stat().Qid}, nil
}

func (s *g9server) Walk(gc go9p.Conn, t *proto.TWalk) (proto.FCall, error) {
	c := gc.(*g9conn)
	i, ok := c.fids.Load(t.Fid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)
	file := info.n
	if t.Nwname > 0 && t.Wname[0] == ".." {
		parent := file.Parent()
		if parent != nil {
			c.fids.Store(t.Newfid, info.deriveInfo(parent))
			qids := make([]proto.Qid, 1)
			qids[0] = parent.Stat().Qid
			return &proto.RWalk{Header: proto.Header{Type: proto.Rwalk, Tag: t.Tag}, Nwqid: 1, Wqid: qids}, nil
		} else {
			return &proto.RWalk{Header: proto.Header{Type: proto.Rwalk, Tag: t.Tag}, Nwqid: 0, Wqid: nil}, nil
		}
	}

	qids := make([]proto.Qid, 0)
	for i := 0; i < int(t.Nwname); i++ {
		if dir, ok := file.(g9Dir); ok {
			file, ok = dir.Children()[t.Wname[i]]
			if !ok {
				if s.fs.WalkFail == nil {
					return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "No such path"}, nil
				}
				f, err := s.fs.WalkFail(s.fs, dir, t.Wname[i])
				if err != nil {
					return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
				}
				if f == nil {
					return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "No such path"}, nil
				}
				modDir, ok := dir.(g9ModDir)
				if !ok {
					return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: fmt.Sprintf("%s does not support modification.", g9FullPath(dir))}, nil
				}
				err = modDir.AddChild(f)
				if err != nil {
					return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
				}
				file = f
			}
			qids = append(qids, file.Stat().Qid)
		} else {
			return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "No such path"}, nil
		}
	}
	c.fids.Store(t.Newfid, info.deriveInfo(file))
	return &proto.RWalk{Header: proto.Header{Type: proto.Rwalk, Tag: t.Tag}, Nwqid: uint16(len(qids)), Wqid: qids}, nil
}

func (s *g9server) Open(gc go9p.Conn, t *proto.TOpen) (proto.FCall, error) {
	c := gc.(*g9conn)
	//info, ok := c.fids[t.Fid]
	i, ok := c.fids.Load(t.Fid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)
	if info.openMode != proto.None {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Fid already open."}, nil
	}
	if !s.fs.ignorePerms && !g9openPermission(info.n, info.uname, t.Mode&0x0F) {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
	}

	switch n := info.n.(type) {
	case g9Dir:
		if (t.Mode&0x0F) == proto.Owrite ||
			(t.Mode&0x0F) == proto.Ordwr {
			return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Cannot write to directory."}, nil
		}
		children := n.Children()
		cl := make([]g9FSNode, 0)
		for _, c := range children {
			cl = append(cl, c)
		}
		info.extra = cl
	case g9File:
		err := n.Open(c.toConnFid(t.Fid), t.Mode)
		if err != nil {
			return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
		}
	}
	info.openMode = t.Mode
	info.openOffset = info.n.Stat().Length

	return &proto.ROpen{Header: proto.Header{Type: proto.Ropen, Tag: t.Tag}, Qid: info.n.Stat().Qid, Iounit: proto.IOUnit}, nil
}

func (s *g9server) Create(gc go9p.Conn, t *proto.TCreate) (proto.FCall, error) {
	c := gc.(*g9conn)
	i, ok := c.fids.Load(t.Fid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)
	if !s.fs.ignorePerms && !g9openPermission(info.n, info.uname, proto.Owrite) {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
	}

	if dir, ok := info.n.(g9Dir); ok {
		var new g9FSNode
		var err error
		if t.Perm&proto.DMDIR != 0 {
			if s.fs.CreateDir != nil {
				new, err = s.fs.CreateDir(s.fs, dir, info.uname, t.Name, t.Perm, t.Mode)
			} else {
				err = fmt.Errorf("Cannot create directories.")
			}
		} else {
			if s.fs.CreateFile != nil {
				new, err = s.fs.CreateFile(s.fs, dir, info.uname, t.Name, t.Perm, t.Mode)
			} else {
				err = fmt.Errorf("Cannot create files.")
			}
		}
		if err != nil {
			return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
		}
		info = info.deriveInfo(new)
		info.openMode = proto.Mode(t.Mode)
		info.openOffset = 0
		c.fids.Store(t.Fid, info)
		if f, ok := new.(g9File); ok {
			err := f.Open(c.toConnFid(t.Fid), proto.Mode(t.Mode))
			if err != nil {
				return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
			}
		}
		return &proto.RCreate{Header: proto.Header{Type: proto.Rcreate, Tag: t.Tag}, Qid: new.Stat().Qid, Iounit: proto.IOUnit}, nil
	} else if f, ok := info.n.(g9File); ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: f.Stat().Name + ": IS A FILE Not a directory"}, nil
	} else {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: info.n.Stat().Name + ": Not a directory"}, nil
	}
}

func (_ *g9server) Read(gc go9p.Conn, t *proto.TRead) (proto.FCall, error) {
	c := gc.(*g9conn)
	if t.Count > c.msize-11 {
		t.Count = c.msize - 11
	}
	i, ok := c.fids.Load(t.Fid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)

	openmode := info.openMode & 0x0F
	// TODO: Can't we just check against None?
	if openmode != proto.Oread &&
		openmode != proto.Ordwr &&
		openmode != proto.Oexec {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "1File not opened."}, nil
	}

	switch n := info.n.(type) {
	case g9File:
		data, err := n.Read(c.toConnFid(t.Fid), t.Offset, uint64(t.Count))
		if err != nil {
			return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
		}
		return &proto.RRead{Header: proto.Header{Type: proto.Rread, Tag: t.Tag}, Count: uint32(len(data)), Data: data}, nil
	case g9Dir:
		return g9readDir(t, info), nil
	}
	return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "2File not opened."}, nil
}

func g9readDir(t *proto.TRead, info *g9fidInfo) proto.FCall {
	contents := make([]byte, 0)
	children := info.extra.([]g9FSNode)

	var length uint64

	// determine which child to start with based on read offset.
	startIndex := -1
	for i, c := range children {
		st := c.Stat()
		nextLength := uint64(st.ComposeLength())
		if length+nextLength > t.Offset {
			startIndex = i
			break
		}
		length = length + nextLength
	}

	// Offset is beyond the end of our list.
	if startIndex < 0 {
		return &proto.RRead{Header: proto.Header{Type: proto.Rread, Tag: t.Tag}, Count: 0, Data: nil}
	}

	for _, f := range children[startIndex:] {
		st := f.Stat()
		nextLength := uint32(st.ComposeLength())
		if uint32(len(contents))+nextLength > t.Count {
			break
		}
		contents = append(contents, st.Compose()...)
	}
	return &proto.RRead{Header: proto.Header{Type: proto.Rread, Tag: t.Tag}, Count: uint32(len(contents)), Data: contents}
}

func (_ *g9server) Write(gc go9p.Conn, t *proto.TWrite) (proto.FCall, error) {
	c := gc.(*g9conn)
	i, ok := c.fids.Load(t.Fid)
	if !ok {
		// TODO: Handle Auth
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)

	if (info.openMode&0x0F) != proto.Owrite &&
		(info.openMode&0x0F) != proto.Ordwr {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "File not opened for write."}, nil
	} else if (info.n.Stat().Mode & proto.DMDIR) != 0 {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Cannot write to directory."}, nil
	}

	offset := t.Offset
	if f, ok := info.n.(g9File); ok {
		n, err := f.Write(c.toConnFid(t.Fid), offset, t.Data)
		if err != nil {
			return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
		}
		return &proto.RWrite{Header: proto.Header{Type: proto.Rwrite, Tag: t.Tag}, Count: n}, nil
	} else {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Cannot write to directory."}, nil
	}
}

func (_ *g9server) Clunk(gc go9p.Conn, t *proto.TClunk) (proto.FCall, error) {
	c := gc.(*g9conn)
	i, ok := c.fids.Load(t.Fid)
	c.fids.Delete(t.Fid)
	if !ok {
		return &proto.RClunk{Header: proto.Header{Type: proto.Rclunk, Tag: t.Tag}}, nil
	}
	info := i.(*g9fidInfo)

	if info.openMode != proto.None {
		if f, ok := info.n.(g9File); ok {
			err := f.Close(c.toConnFid(t.Fid))
			if err != nil {
				return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
			}
		}
	}
	return &proto.RClunk{Header: proto.Header{Type: proto.Rclunk, Tag: t.Tag}}, nil
}

func (s *g9server) Remove(gc go9p.Conn, t *proto.TRemove) (proto.FCall, error) {
	c := gc.(*g9conn)
	i, ok := c.fids.Load(t.Fid)
	c.fids.Delete(t.Fid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)

	if !s.fs.ignorePerms && !g9openPermission(info.n, info.uname, proto.Owrite) {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
	}

	var err error
	if s.fs.RemoveFile != nil {
		err = s.fs.RemoveFile(s.fs, info.n)
	} else {
		err = fmt.Errorf("Cannot delete files.")
	}
	if err != nil {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
	}
	return &proto.RRemove{Header: proto.Header{Type: proto.Rremove, Tag: t.Tag}}, nil
}

func (_ *g9server) Stat(gc go9p.Conn, t *proto.TStat) (proto.FCall, error) {
	c := gc.(*g9conn)
	i, ok := c.fids.Load(t.Fid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)

	return &proto.RStat{Header: proto.Header{Type: proto.Rstat, Tag: t.Tag}, Stat: info.n.Stat()}, nil
}

/* The name can be changed by anyone with write permission in
 * the parent directory; it is an error to change the name to
 * that of an existing file.
 *
 * The length can be changed (affecting the actual length of
 * the file) by anyone with write permission on the file. It
 * is an error to attempt to set the length of a directory to
 * a non-zero value, and servers may decide to reject length
 * changes for other reasons.
 *
 * The mode and mtime can be changed by the owner of the file
 * or the group leader of the file's current group.
 *
 * The directory bit cannot be changed by a wstat;
 *
 * the other defined permission and mode bits can.
 *
 * The gid can be changed: by the owner if also a member of
 * the new group; or by the group leader of the file's current
 * group if also leader of the new group (see intro(5) for
 * more information about permissions and users(6) for users
 * and groups)
 */

/* A wstat request can avoid modifying some properties of the
 * file by providing explicit ``don't touch'' values in the
 * stat data that is sent: zero-length strings for text
 * values and the maximum unsigned value of appropriate size
 * for inte- gral values. As a special case, if all the
 * elements of the directory entry in a Twstat message are
 * ``don't touch'' val- ues, the g9server may interpret it as a
 * request to guarantee that the contents of the associated
 * file are committed to stable storage before the Rwstat
 * message is returned. (Con- sider the message to mean,
 * ``make the state of the file exactly what it claims to be.'')
 */
func (s *g9server) Wstat(gc go9p.Conn, t *proto.TWstat) (proto.FCall, error) {
	c := gc.(*g9conn)
	i, ok := c.fids.Load(t.Fid)
	if !ok {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Bad Fid."}, nil
	}
	info := i.(*g9fidInfo)

	stat := info.n.Stat()
	newstat := &t.Stat
	relation := g9userRelation(info.uname, info.n)

	{
		// Need to check all this stuff before we change *ANYTHING*
		// The g9server needs to accept ALL the changes or none of them.
		if len(newstat.Name) != 0 {
			if !s.fs.ignorePerms && relation != g9ugo_user {
				log.Println("Can't change name. Not owner.")
				return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
			}
		}

		if newstat.Length != math.MaxUint64 && newstat.Length != stat.Length {
			if !s.fs.ignorePerms && !g9openPermission(info.n, info.uname, proto.Owrite) {
				log.Printf("Can't alter length. Don't have write permission. OLD: %d, NEW: %d\n", stat.Length, newstat.Length)
				return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
			}
		}

		if newstat.Mode != math.MaxUint32 && newstat.Mode != stat.Mode {
			if !s.fs.ignorePerms && relation != g9ugo_user {
				log.Printf("Can't alter mode. Not owner. OLD: %#o, NEW: %#o\n", stat.Mode, newstat.Mode)
				return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
			}
		}

		if newstat.Mtime != math.MaxUint32 && newstat.Mtime != stat.Mtime {
			if !s.fs.ignorePerms && relation != g9ugo_user {
				log.Println("Can't alter mtime. Not owner.")
				return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
			}
		}

		if len(newstat.Gid) != 0 {
			if !s.fs.ignorePerms && (info.n.Stat().Uid != info.uname ||
				!g9userInGroup(info.uname, newstat.Gid)) {
				log.Println("Can't changegroup. Not owner or not member of new group.")
				return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: "Permission denied."}, nil
			}
		}
	}

	// Do the changes.
	if len(newstat.Name) != 0 {
		stat.Name = newstat.Name
	}

	if newstat.Length != math.MaxUint64 {
		stat.Length = newstat.Length
	}

	if newstat.Mode != math.MaxUint32 {
		newmode := newstat.Mode & 0x000001FF
		stat.Mode = (stat.Mode & ^uint32(0x1FF)) | newmode
	}

	if newstat.Mtime != math.MaxUint32 {
		stat.Mtime = newstat.Mtime
	}

	if len(newstat.Gid) != 0 {
		stat.Gid = newstat.Gid
	}

	if err := info.n.WriteStat(&stat); err != nil {
		return &proto.RError{Header: proto.Header{Type: proto.Rerror, Tag: t.Tag}, Ename: err.Error()}, nil
	}
	return &proto.RWstat{Header: proto.Header{Type: proto.Rwstat, Tag: t.Tag}}, nil

}

// g9StaticFile implements g9File. It is a very simple
// implementation that allows the reading and writing
// of a byte slice that every client sees. Writes modify
// the content and reads serve the content.
type g9StaticFile struct {
	g9BaseFile
	Data []byte
}

// g9NewStaticFile returns a g9StaticFile that contains the
// byte slice data.
func g9NewStaticFile(s *proto.Stat, data []byte) *g9StaticFile {
	s.Length = uint64(len(data))
	return &g9StaticFile{
		g9BaseFile: g9BaseFile{fStat: *s},
		Data:       data,
	}
}

func (f *g9StaticFile) Stat() proto.Stat {
	f.Lock()
	defer f.Unlock()
	f.fStat.Length = uint64(len(f.Data))
	return f.fStat
}

func (f *g9StaticFile) Open(fid uint64, omode proto.Mode) error {
	if omode&proto.Otrunc > 0 {
		f.Lock()
		defer f.Unlock()
		f.Data = make([]byte, 0)
	}
	return nil
}

func (f *g9StaticFile) Read(fid uint64, offset uint64, count uint64) ([]byte, error) {
	f.RLock()
	defer f.RUnlock()
	flen := uint64(len(f.Data))
	if offset >= flen {
		return []byte{}, nil
	}
	if offset+count > flen {
		count = flen - offset
	}
	return f.Data[offset : offset+count], nil
}

func (f *g9StaticFile) Write(fid uint64, offset uint64, data []byte) (uint32, error) {
	f.Lock()
	defer f.Unlock()
	flen := uint64(len(f.Data))
	count := uint64(len(data))
	if offset+count > flen {
		newlen := offset + count
		f.fStat.Length = newlen
		// TODO: Maybe this can be optimized
		f.Data = append(f.Data, make([]byte, newlen-flen)...)
	}

	copy(f.Data[offset:offset+count], data)
	return uint32(len(data)), nil
}

// g9StaticDir is a g9Dir that simply keeps track of a
// set of child Files.
type g9StaticDir struct {
	dStat proto.Stat
	//children map[string]g9FSNode
	children []g9FSNode
	parent   g9Dir
	sync.RWMutex
}

func g9NewStaticDir(stat *proto.Stat) *g9StaticDir {
	dir := &g9StaticDir{
		dStat: *stat,
		//children: make(map[string]g9FSNode),
		children: make([]g9FSNode, 0),
	}
	// Make sure stat is marked as a directory.
	dir.dStat.Mode |= proto.DMDIR
	// qtype bits should be consistent with Stat mode.
	dir.dStat.Qid.Qtype = uint8(dir.dStat.Mode >> 24)
	return dir
}

func (d *g9StaticDir) Stat() proto.Stat {
	return d.dStat
}

func (d *g9StaticDir) WriteStat(s *proto.Stat) error {
	d.Lock()
	defer d.Unlock()
	d.dStat = *s
	return nil
}

func (d *g9StaticDir) SetParent(p g9Dir) {
	d.Lock()
	defer d.Unlock()
	d.parent = p
}

func (d *g9StaticDir) Parent() g9Dir {
	d.RLock()
	defer d.RUnlock()
	return d.parent
}

func (d *g9StaticDir) Children() map[string]g9FSNode {
	d.RLock()
	defer d.RUnlock()
	ret := make(map[string]g9FSNode)
	for _, n := range d.children {
		ret[n.Stat().Name] = n
	}
	return ret
}

func (d *g9StaticDir) AddChild(n g9FSNode) error {
	d.Lock()
	defer d.Unlock()
	stat := n.Stat()
	for _, n := range d.children {
		if n.Stat().Name == stat.Name {
			return fmt.Errorf("%s already exists", stat.Name)
		}
	}
	d.children = append(d.children, n)
	n.SetParent(d)
	return nil
}

func (d *g9StaticDir) DeleteChild(name string) error {
	d.Lock()
	defer d.Unlock()
	k := 0
	for _, c := range d.children {
		if c.Stat().Name != name {
			d.children[k] = c
			k++
		} else {
			c.SetParent(nil)
		}
	}
	d.children = d.children[:k]
	return nil
}

// g9CreateStaticFile is a function meant to be passed to g9WithCreateFile.
// It will add an empty g9StaticFile to the g9FS whenever a client attempts to
// create a file.
func g9CreateStaticFile(fs *g9FS, parent g9Dir, user, name string, perm uint32, mode uint8) (g9File, error) {
	modParent, ok := parent.(g9ModDir)
	if !ok {
		return nil, fmt.Errorf("%s does not support modification.", g9FullPath(parent))
	}
	f := g9NewStaticFile(fs.NewStat(name, user, user, perm), []byte{})
	err := modParent.AddChild(f)
	return f, err
}

// g9CreateStaticDir is a function meant to be passed to g9WithCreateDir.
// It will add an empty g9StaticDir to the g9FS whenever a client attempts to
// create a directory.
func g9CreateStaticDir(fs *g9FS, parent g9Dir, user, name string, perm uint32, mode uint8) (g9Dir, error) {
	modParent, ok := parent.(g9ModDir)
	if !ok {
		return nil, fmt.Errorf("%s does not support modification.", g9FullPath(parent))
	}
	f := g9NewStaticDir(fs.NewStat(name, user, user, perm))
	err := modParent.AddChild(f)
	return f, err
}

const (
	g9ugo_user  = iota
	g9ugo_group = iota
	g9ugo_other = iota
)

func g9userInGroup(user string, group string) bool {
	// For now groups and users are equivalent.
	return user == group
}

func g9userRelation(user string, f g9FSNode) uint8 {
	st := f.Stat()
	if user == st.Uid {
		return g9ugo_user
	}
	if g9userInGroup(user, st.Gid) {
		return g9ugo_group
	}
	return g9ugo_other
}

func g9omodePermits(perm uint8, omode proto.Mode) bool {
	switch omode {
	case proto.Oread:
		return perm&0x4 != 0
	case proto.Owrite:
		return perm&0x2 != 0
	case proto.Ordwr:
		return (perm&0x2 != 0) && (perm&0x4 != 0)
	case proto.Oexec:
		return perm&0x01 != 0
	case proto.None:
		return false
	default:
		return false
	}
}

func g9openPermission(f g9FSNode, user string, omode proto.Mode) bool {
	switch g9userRelation(user, f) {
	case g9ugo_user:
		return g9omodePermits(uint8(f.Stat().Mode>>6)&0x07, omode)
	case g9ugo_group:
		return g9omodePermits(uint8(f.Stat().Mode>>3)&0x07, omode)
	case g9ugo_other:
		return g9omodePermits(uint8(f.Stat().Mode)&0x07, omode)
	default:
		return false
	}
}
