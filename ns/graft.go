package ns

import (
	"context"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/vfs"
)

// A Graft is what a room adds to directories another room serves, as
// Plan 9's bind -a adds one directory's files to another's: files in
// each directory that At names, and verbs of that directory's ctl file
// (the ipc room's /proc/<pid>/ipc and its mail, call, ... verbs in
// /proc/<pid>/ctl). The room that serves the directory makes it with
// the grafts the namespace holds for its path (Space.Grafted), so the
// two rooms never import each other and a user sees one directory.
type Graft struct {
	// At names the directories: a namespace path whose "*" elements
	// stand for any one name ("/proc/*").
	At string
	// Files returns the files added to d (nil: none).
	Files func(d GraftDir) []vfs.DirEntry
	// Verbs returns the verbs added to d's ctl file (nil: none).
	Verbs func(d GraftDir) map[string]CtlVerb
}

// GraftDir is a directory a graft adds to, as the room that serves it
// describes it.
type GraftDir struct {
	// Path is the directory's namespace path ("/proc/p_1"); Names are
	// the names the "*" elements of the graft's At stand for (["p_1"]),
	// which Space.Grafted fills.
	Path  string
	Names []string
	// Owner is the owner part of the Meta of the directory's files, as
	// the serving room makes its own: a grafted file is Owner.At(path,
	// mode).
	Owner Meta
	// Changed, if set, is when a change of the whole directory (every
	// file of it) last happened, as the serving room knows it: a
	// grafted file's mtime is the later of it and its own.
	Changed func(ctx context.Context, cred vfs.Cred) time.Time
}

// A Grafter is a room that adds to directories other rooms serve:
// Space.Add keeps its grafts.
type Grafter interface {
	Grafts() []Graft
}

// Grafted returns the files and the ctl verbs that the grafts of the
// rooms added give the directory d. A name the serving room has itself
// stays its own: the caller adds only the names it lacks.
func (s *Space) Grafted(d GraftDir) ([]vfs.DirEntry, map[string]CtlVerb) {
	s.mu.Lock()
	grafts := s.grafts
	s.mu.Unlock()
	var files []vfs.DirEntry
	verbs := map[string]CtlVerb{}
	for _, g := range grafts {
		names, ok := matchGraft(g.At, d.Path)
		if !ok {
			continue
		}
		gd := d
		gd.Names = names
		if g.Files != nil {
			files = append(files, g.Files(gd)...)
		}
		if g.Verbs != nil {
			for v, f := range g.Verbs(gd) {
				verbs[v] = f
			}
		}
	}
	return files, verbs
}

// matchGraft matches the namespace path p against the pattern at, whose
// "*" elements match any one name, and returns the names they matched.
func matchGraft(at, p string) ([]string, bool) {
	pat := strings.Split(strings.Trim(at, "/"), "/")
	got := strings.Split(strings.Trim(p, "/"), "/")
	if len(pat) != len(got) {
		return nil, false
	}
	var names []string
	for i, e := range pat {
		switch {
		case e == "*" && got[i] != "":
			names = append(names, got[i])
		case e != got[i]:
			return nil, false
		}
	}
	return names, true
}

// Later returns an mtime source that is the later of a and b (either may
// be nil): a grafted file that changes with its own room and with the
// directory it is grafted into.
func Later(a, b func(ctx context.Context, cred vfs.Cred) time.Time) func(ctx context.Context, cred vfs.Cred) time.Time {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	}
	return func(ctx context.Context, cred vfs.Cred) time.Time {
		ta, tb := a(ctx, cred), b(ctx, cred)
		if tb.After(ta) {
			return tb
		}
		return ta
	}
}
