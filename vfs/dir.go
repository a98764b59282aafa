package vfs

import (
	"context"
	"sort"
	"sync"
)

// StaticDir is a directory whose children are added by the tree's builder.
type StaticDir struct {
	Meta
	mu       sync.RWMutex
	names    []string
	children map[string]Node
}

var (
	_ Dir = (*StaticDir)(nil)
	_ Dir = (*FuncDir)(nil)
)

// NewDir returns a StaticDir with the given children.
func NewDir(m Meta, children ...DirEntry) *StaticDir {
	d := &StaticDir{Meta: m, children: map[string]Node{}}
	for _, c := range children {
		d.Add(c.Name, c.Node)
	}
	return d
}

// Add adds or replaces the child name.
func (d *StaticDir) Add(name string, n Node) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.children[name]; !ok {
		d.names = append(d.names, name)
		sort.Strings(d.names)
	}
	d.children[name] = n
}

// Drop removes the child name and reports whether there was one. Walks
// that come later do not find it; handles open on it are not affected.
func (d *StaticDir) Drop(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.children[name]; !ok {
		return false
	}
	delete(d.children, name)
	i := sort.SearchStrings(d.names, name)
	d.names = append(d.names[:i], d.names[i+1:]...)
	return true
}

// Lookup implements Dir.
func (d *StaticDir) Lookup(ctx context.Context, cred Cred, name string) (Node, error) {
	d.mu.RLock()
	n, ok := d.children[name]
	d.mu.RUnlock()
	if !ok {
		return nil, ErrNotExist
	}
	return n, nil
}

// ReadDir implements Dir.
func (d *StaticDir) ReadDir(ctx context.Context, cred Cred) ([]DirEntry, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	out := make([]DirEntry, len(d.names))
	for i, name := range d.names {
		out[i] = DirEntry{Name: name, Node: d.children[name]}
	}
	return out, nil
}

// FuncDir is a directory whose children are computed on each call.
type FuncDir struct {
	Meta
	// List returns the children.
	List func(ctx context.Context, cred Cred) ([]DirEntry, error)
	// Find returns one child; if nil, Lookup searches List.
	Find func(ctx context.Context, cred Cred, name string) (Node, error)
}

// Lookup implements Dir.
func (d *FuncDir) Lookup(ctx context.Context, cred Cred, name string) (Node, error) {
	if d.Find != nil {
		return d.Find(ctx, cred, name)
	}
	ents, err := d.List(ctx, cred)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.Name == name {
			return e.Node, nil
		}
	}
	return nil, ErrNotExist
}

// ReadDir implements Dir.
func (d *FuncDir) ReadDir(ctx context.Context, cred Cred) ([]DirEntry, error) {
	return d.List(ctx, cred)
}
