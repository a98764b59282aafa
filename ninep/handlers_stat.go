package ninep

// The handlers of Tstat and Twstat: a node's attributes as a 9P stat and
// a qid, and the changes a Twstat asks for (see handlers.go for the rules
// every handler follows).

import (
	"io/fs"
	"strconv"
	"time"

	"github.com/knusbaum/go9p/proto"

	"gsvfs.dev/gsvfs/vfs"
)

// stat handles Tstat. Checked: fid exists. The node's Attr becomes the
// stat (see statOf); an auth fid gets a made-up stat. Cancellation ends
// the Attr call.
func (c *conn) stat(r *request, m *proto.TStat) (proto.FCall, error) {
	f, err := c.getFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	var st proto.Stat
	if f.auth != nil {
		st = proto.Stat{Qid: f.qid, Mode: dmAuth | 0600, Name: "auth",
			Uid: f.auth.uname, Gid: f.auth.uname, Muid: f.auth.uname}
	} else {
		l := f.snapshot().loc
		a, err := l.node.Attr(r.ctx, f.cred)
		if err != nil {
			return nil, err
		}
		if st, err = statOf(a, l.name); err != nil {
			return nil, err
		}
	}
	if rstatHdr+int(st.ComposeLength()) > int(c.msize.Load()) {
		return nil, errStatTooLarge
	}
	return &proto.RStat{Header: hdr(r, proto.Rstat), Stat: st}, nil
}

// qidOf returns the qid of a node: path = Ino, type from the mode, version
// 0. A synthetic file (content rendered by the tree, not stored) is
// QTTMP, Plan 9's mark of a file that is not backed up: a client that
// reads it knows its length describes only what an open would read now
// (RemoteDir serves it with direct I/O).
func qidOf(a vfs.Attr) proto.Qid {
	var t uint8
	if a.Synthetic && !a.Mode.IsDir() {
		t |= qtTmp
	}
	if a.Mode.IsDir() {
		t |= qtDir
	}
	if a.Mode&fs.ModeAppend != 0 {
		t |= qtAppend
	}
	if a.Mode&fs.ModeExclusive != 0 {
		t |= qtExcl
	}
	if a.Mode&fs.ModeTemporary != 0 {
		t |= qtTmp
	}
	return proto.Qid{Qtype: t, Uid: a.Ino}
}

// statOf turns an Attr into a 9P stat: qid from qidOf, mode DMDIR (and
// DMAPPEND, DMEXCL, DMTMP) | permission bits, atime = mtime, length = Size
// (0 for directories), uid/gid/muid = User/Group (or the numbers if empty).
func statOf(a vfs.Attr, name string) (proto.Stat, error) {
	qid := qidOf(a)
	// The DM type bits are the qid type bits in the top byte.
	mode := uint32(qid.Qtype)<<24 | uint32(a.Mode.Perm())
	var length uint64
	if !a.Mode.IsDir() && a.Size > 0 {
		length = uint64(a.Size)
	}
	var mtime uint32
	if !a.Mtime.IsZero() {
		if s := a.Mtime.Unix(); s > 0 && s <= 1<<32-1 {
			mtime = uint32(s)
		}
	}
	uid, gid := a.User, a.Group
	if uid == "" {
		uid = strconv.FormatUint(uint64(a.Uid), 10)
	}
	if gid == "" {
		gid = strconv.FormatUint(uint64(a.Gid), 10)
	}
	st := proto.Stat{Qid: qid, Mode: mode, Atime: mtime, Mtime: mtime,
		Length: length, Name: name, Uid: uid, Gid: gid, Muid: uid}
	if statFixed+len(st.Name)+len(st.Uid)+len(st.Gid)+len(st.Muid) > MaxMsize-rstatHdr {
		return proto.Stat{}, errStatTooLarge
	}
	return st, nil
}

// wstat handles Twstat. Checked: fid exists and is not an auth fid; type,
// dev, qid and muid are "don't touch"; uid and gid are "don't touch" or
// unchanged; a mode keeps the DMDIR bit; a directory's length is not set;
// a new name is valid, the fid is not the root and its directory implements
// vfs.Renamer; mode, length or mtime need a vfs.Setter node (or, for a
// length alone, an open vfs.Truncater handle). All checks happen before any
// change; then SetAttr, then the rename within the same directory. A stat
// that touches nothing is a sync: an open vfs.Syncer handle is synced.
// atime is ignored. Cancellation ends the node calls.
func (c *conn) wstat(r *request, m *proto.TWstat) (proto.FCall, error) {
	f, err := c.fileFid(m.Fid)
	if err != nil {
		return nil, err
	}
	defer c.putFid(f)
	d := &m.Stat
	switch {
	case d.Type != 0xFFFF:
		return nil, errWstatType
	case d.Dev != ^uint32(0):
		return nil, errWstatDev
	case d.Qid.Qtype != 0xFF || d.Qid.Vers != ^uint32(0) || d.Qid.Uid != ^uint64(0):
		return nil, errWstatQid
	case d.Muid != "":
		return nil, errWstatMuid
	}
	snap := f.snapshot()
	l, qid, h := snap.loc, snap.qid, snap.handle
	isDir := qid.Qtype&qtDir != 0
	reply := &proto.RWstat{Header: hdr(r, proto.Rwstat)}

	if d.Mode == ^uint32(0) && d.Length == ^uint64(0) && d.Mtime == ^uint32(0) &&
		d.Name == "" && d.Uid == "" && d.Gid == "" {
		if s, ok := h.(vfs.Syncer); ok {
			if err := s.Sync(r.ctx); err != nil {
				return nil, err
			}
		}
		return reply, nil
	}

	var sa vfs.SetAttr
	set := false
	if d.Mode != ^uint32(0) {
		if (d.Mode&proto.DMDIR != 0) != isDir {
			return nil, errWstatDMDIR
		}
		mode := fs.FileMode(d.Mode & 0777)
		sa.Mode, set = &mode, true
	}
	if d.Length != ^uint64(0) {
		if isDir {
			return nil, errWstatDirLength
		}
		if int64(d.Length) < 0 {
			return nil, errBadOffset
		}
		size := int64(d.Length)
		sa.Size, set = &size, true
	}
	if d.Mtime != ^uint32(0) {
		t := time.Unix(int64(d.Mtime), 0)
		sa.Mtime, set = &t, true
	}
	if d.Uid != "" || d.Gid != "" {
		a, err := l.node.Attr(r.ctx, f.cred)
		if err != nil {
			return nil, err
		}
		st, err := statOf(a, l.name)
		if err != nil {
			return nil, err
		}
		if d.Uid != "" && d.Uid != st.Uid {
			return nil, errWstatUid
		}
		if d.Gid != "" && d.Gid != st.Gid {
			return nil, errWstatGid
		}
	}
	var renamer vfs.Renamer
	rename := d.Name != "" && d.Name != l.name
	if rename {
		if l.parent == nil {
			return nil, errRenameRoot
		}
		if !validName(d.Name) {
			return nil, errBadName
		}
		var ok bool
		if renamer, ok = l.parent.node.(vfs.Renamer); !ok || l.parentDir() == nil {
			return nil, vfs.ErrNotSupp
		}
	}
	var setter vfs.Setter
	var truncater vfs.Truncater
	if set {
		var ok bool
		if setter, ok = l.node.(vfs.Setter); !ok {
			truncater, ok = h.(vfs.Truncater)
			if !ok || sa.Mode != nil || sa.Mtime != nil {
				return nil, vfs.ErrNotSupp
			}
		}
	}

	switch {
	case setter != nil:
		if _, err := setter.SetAttr(r.ctx, f.cred, sa); err != nil {
			return nil, err
		}
	case truncater != nil:
		if err := truncater.Truncate(r.ctx, *sa.Size); err != nil {
			return nil, err
		}
	}
	if rename {
		if err := renamer.Rename(r.ctx, f.cred, l.name, l.parentDir(), d.Name); err != nil {
			return nil, err
		}
		f.mu.Lock()
		if f.loc == l {
			f.loc = &loc{node: l.node, name: d.Name, parent: l.parent}
		}
		f.mu.Unlock()
	}
	return reply, nil
}
