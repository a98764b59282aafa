package adapters

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// The room's files:
//
//	/sys/adapters/ctl                       connect|disconnect <kind> <account>; send <kind> <account> <surface-kind> <surface-id> <text...>
//	/sys/adapters/<kind>/status             the kind's accounts the reader may see, as JSON
//	/sys/adapters/<kind>/<account>/status   one account, as JSON
//	/sys/adapters/<kind>/<account>/ctl      connect | disconnect | send <surface-kind> <surface-id> <text...>
//	/sys/links                              the reader's identity links, one a line
//
// Every listing and file is a syscall made as the reader.

// Where the room's files are bound.
const (
	adaptersPath = "/sys/adapters"
	linksPath    = "/sys/links"
)

// adaptersDir is /sys/adapters.
func (r *Room) adaptersDir() vfs.Dir {
	ctl := r.space.Ctl(adaptersPath, ns.RootMeta(adaptersPath+"/ctl", 0o666), topVerbs())
	errv := r.space.ErrView(adaptersPath)
	fixed := []vfs.DirEntry{{Name: "ctl", Node: ctl}, {Name: "err", Node: errv}}
	return &vfs.FuncDir{Meta: ns.RootMeta(adaptersPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			out := append([]vfs.DirEntry(nil), fixed...)
			for _, k := range r.kinds(ctx, cred) {
				out = append(out, vfs.DirEntry{Name: k, Node: r.kindDir(k)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			for _, e := range fixed {
				if e.Name == name {
					return e.Node, nil
				}
			}
			for _, k := range r.kinds(ctx, cred) {
				if k == name {
					return r.kindDir(k), nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
}

// accounts are the accounts of kind ("" every kind) the reader sees.
func (r *Room) accounts(ctx context.Context, cred vfs.Cred, kind string) []abi.AdapterAccountRecord {
	res, err := kernel.Do(ctx, r.k, ns.CallerOf(cred, ""), abi.AdapterStatus, &abi.AdapterStatusArgs{Adapter: kind})
	if err != nil {
		return nil
	}
	return res.Accounts
}

// kinds are the adapter kinds of the accounts the reader sees, sorted.
func (r *Room) kinds(ctx context.Context, cred vfs.Cred) []string {
	seen := map[string]bool{}
	var out []string
	for _, a := range r.accounts(ctx, cred, "") {
		if !seen[a.Adapter] {
			seen[a.Adapter] = true
			out = append(out, a.Adapter)
		}
	}
	sort.Strings(out)
	return out
}

// kindDir is /sys/adapters/<kind>.
func (r *Room) kindDir(kind string) vfs.Dir {
	path := adaptersPath + "/" + kind
	status := ns.ViewOf(r.space, path+"/status", 0o444, abi.AdapterStatus, &abi.AdapterStatusArgs{Adapter: kind}, renderJSON[*abi.AdapterStatusResult])
	return &vfs.FuncDir{Meta: ns.RootMeta(path, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			out := []vfs.DirEntry{{Name: "status", Node: status}}
			for _, a := range r.accounts(ctx, cred, kind) {
				if fileName(a.AccountID) {
					out = append(out, vfs.DirEntry{Name: a.AccountID, Node: r.accountDir(kind, a.AccountID)})
				}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if name == "status" {
				return status, nil
			}
			for _, a := range r.accounts(ctx, cred, kind) {
				if a.AccountID == name && fileName(name) {
					return r.accountDir(kind, name), nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
}

// fileName says whether an account id can be a file's name.
func fileName(s string) bool {
	return s != "" && s != "." && s != ".." && !strings.ContainsAny(s, "/\x00")
}

// accountDir is /sys/adapters/<kind>/<account>.
func (r *Room) accountDir(kind, account string) vfs.Dir {
	path := adaptersPath + "/" + kind + "/" + account
	status := ns.ViewOf(r.space, path+"/status", 0o444, abi.AdapterStatus, &abi.AdapterStatusArgs{Adapter: kind, AccountID: account},
		func(res *abi.AdapterStatusResult) ([]byte, error) {
			if len(res.Accounts) == 0 {
				return nil, abi.E(abi.NotExist, abi.Path(path), "no such adapter account")
			}
			return renderJSON(res.Accounts[0])
		})
	ctl := r.space.Ctl(path, ns.RootMeta(path+"/ctl", 0o666), accountVerbs(kind, account))
	errv := r.space.ErrView(path)
	entries := []vfs.DirEntry{{Name: "ctl", Node: ctl}, {Name: "err", Node: errv}, {Name: "status", Node: status}}
	return &vfs.FuncDir{Meta: ns.RootMeta(path, fs.ModeDir|0o555),
		List: func(context.Context, vfs.Cred) ([]vfs.DirEntry, error) { return entries, nil },
		Find: func(_ context.Context, _ vfs.Cred, name string) (vfs.Node, error) {
			for _, e := range entries {
				if e.Name == name {
					return e.Node, nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
}

// renderJSON is v as indented JSON with a final newline.
func renderJSON[T any](v T) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// accountVerbs are the verbs of an account's ctl.
func accountVerbs(kind, account string) map[string]ns.CtlVerb {
	acct := func(call abi.Call[abi.AdapterAccountArgs, *abi.AdapterAccountResult]) ns.CtlVerb {
		return func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.AdapterAccountArgs{Adapter: kind, AccountID: account}
			if l.JSON == nil && len(l.Words) != 0 {
				return kernel.Bind(call, a), abi.E(abi.Invalid, "usage: "+l.Verb)
			}
			return kernel.Bind(call, a), nil
		}
	}
	return map[string]ns.CtlVerb{
		"connect":    acct(abi.AdapterConnect),
		"disconnect": acct(abi.AdapterDisconnect),
		"send": func(l ns.CtlLine) (kernel.Bound, error) {
			a := &abi.AdapterSendArgs{Adapter: kind, AccountID: account}
			if l.JSON != nil {
				return kernel.Bind(abi.AdapterSend, a), nil
			}
			if len(l.Words) < 3 {
				return kernel.Bind(abi.AdapterSend, a), abi.E(abi.Invalid, "usage: send <surface-kind> <surface-id> <text...>")
			}
			a.Surface = abi.AdapterSurface{Kind: l.Words[0], ID: l.Words[1]}
			a.Text = strings.Join(l.Words[2:], " ")
			return kernel.Bind(abi.AdapterSend, a), nil
		},
	}
}

// topVerbs are the verbs of /sys/adapters/ctl: an account's verbs with
// its kind and account first.
func topVerbs() map[string]ns.CtlVerb {
	out := map[string]ns.CtlVerb{}
	for _, verb := range []string{"connect", "disconnect", "send"} {
		out[verb] = func(l ns.CtlLine) (kernel.Bound, error) {
			if len(l.Words) < 2 {
				return kernel.Bind(abi.AdapterConnect, nil), abi.E(abi.Invalid, "usage: "+verb+" <kind> <account> ...")
			}
			inner := l
			inner.Words = l.Words[2:]
			return accountVerbs(l.Words[0], l.Words[1])[verb](inner)
		}
	}
	return out
}

// linksFile is /sys/links: the reader's identity links, newest first,
// one a line: adapter, account, actor, uid and when it was made.
func (r *Room) linksFile() *vfs.View {
	return ns.ViewOf(r.space, linksPath, 0o444, abi.SysLinkList, &abi.LinkListArgs{}, func(res *abi.LinkListResult) ([]byte, error) {
		var b strings.Builder
		for _, l := range res.Links {
			fmt.Fprintf(&b, "%s\t%s\t%s\t%d\t%s\n", l.Adapter, quoteField(l.AccountID), quoteField(l.ActorID), l.Uid,
				time.UnixMilli(l.CreatedAt).UTC().Format(time.RFC3339))
		}
		return []byte(b.String()), nil
	})
}

// quoteField is s with its blanks and control characters quoted, so that a
// platform's name cannot forge a column or a line.
func quoteField(s string) string {
	if strings.ContainsFunc(s, func(c rune) bool { return c <= ' ' || c == 0x7f }) {
		return fmt.Sprintf("%q", s)
	}
	return s
}
