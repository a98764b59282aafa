package ns_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/kernel/kerneltest"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// graftRoom is a room that only grafts: a file named after the pattern's
// name and a verb, onto the directories of At.
type graftRoom struct{ at string }

func (graftRoom) Syscalls() []kernel.Syscall { return nil }
func (graftRoom) Mounts() []ns.Mount         { return nil }
func (graftRoom) Close() error               { return nil }

func (g graftRoom) Grafts() []ns.Graft {
	return []ns.Graft{{At: g.at,
		Files: func(d ns.GraftDir) []vfs.DirEntry {
			name := "of-" + d.Names[len(d.Names)-1]
			return []vfs.DirEntry{{Name: name, Node: &vfs.View{Meta: d.Owner.At(d.Path+"/"+name, 0o400).WithChanged(d.Changed)}}}
		},
		Verbs: func(d ns.GraftDir) map[string]ns.CtlVerb {
			return map[string]ns.CtlVerb{"poke": func(ns.CtlLine) (kernel.Bound, error) { return kernel.Bound{}, nil }}
		}}}
}

// TestGrafted: the grafts a room added give a directory whose path the
// pattern matches ("*" one name) its files, with the owner and mtime the
// serving room gives, and its verbs; any other directory gets nothing.
func TestGrafted(t *testing.T) {
	e := kerneltest.Open(t)
	space := ns.New(e.K)
	defer space.Close()
	if err := space.Add(context.Background(), graftRoom{at: "/proc/*"}); err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	owner := ns.Meta{Uid: 1000, Gid: 100, Owner: "alice", Group: "users", HostUID: 1001}
	for _, c := range []struct {
		path  string
		files []string
		verbs []string
	}{
		{"/proc/p_1", []string{"of-p_1"}, []string{"poke"}},
		{"/proc/init:0/", []string{"of-init:0"}, []string{"poke"}},
		{"/proc", nil, nil},
		{"/proc/p_1/conversations", nil, nil},
		{"/sys/p_1", nil, nil},
	} {
		files, verbs := space.Grafted(ns.GraftDir{Path: c.path, Owner: owner,
			Changed: func(context.Context, vfs.Cred) time.Time { return at }})
		var names, vs []string
		for _, f := range files {
			names = append(names, f.Name)
			attr, err := f.Node.(*vfs.View).Meta.Attr(context.Background(), e.Alice)
			if err != nil || attr.Uid != 1001 || attr.Mode != 0o400 {
				t.Errorf("%s: %s: %+v, %v; want alice's 0400", c.path, f.Name, attr, err)
			}
		}
		for v := range verbs {
			vs = append(vs, v)
		}
		if !slices.Equal(names, c.files) || !slices.Equal(vs, c.verbs) {
			t.Errorf("%s: files %q, verbs %q; want %q, %q", c.path, names, vs, c.files, c.verbs)
		}
	}
}

// TestLater: a grafted file's mtime is the later of its room's and the
// directory's; a missing source is no source.
func TestLater(t *testing.T) {
	early, late := time.Unix(100, 0), time.Unix(200, 0)
	src := func(t time.Time) func(context.Context, vfs.Cred) time.Time {
		return func(context.Context, vfs.Cred) time.Time { return t }
	}
	for _, c := range []struct {
		name string
		a, b func(context.Context, vfs.Cred) time.Time
		want time.Time
	}{
		{"a later", src(late), src(early), late},
		{"b later", src(early), src(late), late},
		{"no a", nil, src(early), early},
		{"no b", src(late), nil, late},
	} {
		if got := ns.Later(c.a, c.b)(context.Background(), nil); !got.Equal(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	if ns.Later(nil, nil) != nil {
		t.Error("Later(nil, nil) is a source")
	}
}
