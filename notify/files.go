package notify

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// dirPath is where the room's files are bound.
const dirPath = "/var/notify"

// topDir makes /var/notify: ctl, err, and a directory per user. Every
// listing and every file is a syscall made as the reader.
func (r *Room) topDir() vfs.Dir {
	ctl := r.space.CtlShow(dirPath, ns.RootMeta(dirPath+"/ctl", 0o666), ctlVerbs(), showCtl)
	errv := r.space.ErrView(dirPath)
	fixed := []vfs.DirEntry{{Name: "ctl", Node: ctl}, {Name: "err", Node: errv}}
	return &vfs.FuncDir{Meta: ns.RootMeta(dirPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			out := append([]vfs.DirEntry(nil), fixed...)
			for _, u := range r.users(ctx, cred) {
				out = append(out, vfs.DirEntry{Name: u.Username, Node: r.userDir(u)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			for _, e := range fixed {
				if e.Name == name {
					return e.Node, nil
				}
			}
			for _, u := range r.users(ctx, cred) {
				if u.Username == name {
					return r.userDir(u), nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
}

// users are the users whose directories the reader sees listed: every
// user sys.user.list gives the reader (none for nobody). Whether the
// reader may look inside one is the directory's syscall's rule.
func (r *Room) users(ctx context.Context, cred vfs.Cred) []abi.User {
	res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.SysUserList, nil)
	if err != nil {
		return nil
	}
	return res.Users
}

// metaOf is the Meta of the node at path that user u owns, with mode.
func metaOf(u abi.User, path string, mode fs.FileMode) *ns.Meta {
	group := fmt.Sprint(u.Gid)
	switch u.Gid {
	case kernel.RootGID:
		group = "root"
	case kernel.UsersGID:
		group = kernel.UsersGroup
	}
	host := int(u.Uid)
	if u.HostUID != nil {
		host = *u.HostUID
	}
	return &ns.Meta{Path: path, Uid: u.Uid, Gid: u.Gid, Mode: mode, Owner: u.Username, Group: group, HostUID: host}
}

// userDir is /var/notify/<user>: a view per notification of u's that is
// live and not dismissed, named by its id. Only u and root may list it or
// open its files (notification.files, notification.file).
func (r *Room) userDir(u abi.User) vfs.Dir {
	path := dirPath + "/" + u.Username
	part := strconv.FormatUint(uint64(u.Uid), 10)
	meta := metaOf(u, path, fs.ModeDir|0o500).WithChanged(func(context.Context, vfs.Cred) time.Time {
		return r.changes.At(time.Time{}, part)
	})
	return &vfs.FuncDir{Meta: meta,
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			list, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.NotificationFiles, &FilesArgs{Uid: u.Uid})
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, len(list))
			for i, n := range list {
				out[i] = vfs.DirEntry{Name: n.NotificationID, Node: r.fileNode(u, n.NotificationID)}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if _, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.NotificationFile, &FilesArgs{Uid: u.Uid, ID: name}); err != nil {
				return nil, err
			}
			return r.fileNode(u, name), nil
		}}
}

// fileNode is /var/notify/<user>/<id>: the notification as indented JSON,
// rendered when opened; its mtime is when it was made or read.
func (r *Room) fileNode(u abi.User, id string) *vfs.View {
	return &vfs.View{Meta: metaOf(u, dirPath+"/"+u.Username+"/"+id, 0o400),
		RenderAt: func(ctx context.Context, cred vfs.Cred) ([]byte, time.Time, error) {
			n, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.NotificationFile, &FilesArgs{Uid: u.Uid, ID: id})
			if err != nil {
				return nil, time.Time{}, err
			}
			at := n.CreatedAt
			if n.ReadAt != nil && *n.ReadAt > at {
				at = *n.ReadAt
			}
			b, err := render(n)
			return b, time.UnixMilli(at), err
		}}
}

// render is a notification as its file shows it: indented JSON, with a
// final newline. JSON escapes every control character, so no text of a
// notification can forge a line or a terminal sequence.
func render(n *abi.Notification) ([]byte, error) {
	b, err := json.MarshalIndent(n, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ctlVerbs are the verbs of /var/notify/ctl:
//
//	create [title words...] [title=T] [body=B] [level=L] [ttl=DUR]
//	read <id>
//	dismiss <id>
//
// Each acts on the caller's own notifications; read and dismiss of an id
// the caller has no live notification of fail (404). A create's title is its
// words or title=, not both; ttl is a Go duration (90s, 2h). A line may
// carry JSON args instead: create {"title":..,"actions":[..]}.
func ctlVerbs() map[string]ns.CtlVerb {
	byID := func(call abi.Call[abi.NotificationIDArgs, *abi.NotificationResult], verb string) ns.CtlVerb {
		return func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.NotificationIDArgs{}
			if l.JSON != nil {
				return kernel.Bind(call, a), nil
			}
			if len(l.Words) != 1 {
				return kernel.Bind(call, nil), abi.E(abi.Invalid, "usage: "+verb+" <id>")
			}
			a.NotificationID = l.Words[0]
			return kernel.Bind(call, a), nil
		}
	}
	return map[string]ns.CtlVerb{
		"create": func(l ns.CtlLine) (kernel.Bound, error) {
			a, err := parseCreate(l)
			return kernel.Bind(abi.NotificationCreate, a), err
		},
		"read":    byID(abi.NotificationMarkRead, "read"),
		"dismiss": byID(abi.NotificationDismiss, "dismiss"),
	}
}

// parseCreate reads a create line's args.
func parseCreate(l ns.CtlLine) (*abi.NotificationCreateArgs, error) {
	a := &abi.NotificationCreateArgs{}
	if l.JSON != nil {
		return a, nil
	}
	a.Title, a.Body, a.Level = l.Opt("title"), l.Opt("body"), l.Opt("level")
	if len(l.Words) > 0 {
		if a.Title != "" {
			return nil, abi.E(abi.Invalid, "give the title as words or as title=, not both")
		}
		a.Title = strings.Join(l.Words, " ")
	}
	if s, ok := l.LookupOpt("ttl"); ok {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("ttl %q: want a duration such as 90s or 2h", truncate(s)))
		}
		ms := d.Milliseconds()
		a.TtlMs = &ms
	}
	if a.Title == "" {
		return nil, abi.E(abi.Invalid, "usage: create <title...> | title=<title> [body=<text>] [level=info|success|warning|error] [ttl=<duration>]")
	}
	return a, nil
}

// showCtl is what a ctl handle reads back after a line: a create's new
// id alone, or the notification a read or dismiss changed, as JSON.
func showCtl(res any) (string, error) {
	if c, ok := res.(*abi.NotificationCreateResult); ok && c.Notification != nil {
		return c.Notification.NotificationID, nil
	}
	b, err := json.Marshal(res)
	return string(b), err
}
