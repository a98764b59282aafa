package ns

import (
	"strings"
	"sync"
	"time"
)

// Changes are when the parts of a room's tree last changed: the mtimes of
// its files and directories (a file's content, a directory's entries).
// A room keeps one and touches a part where its state changes, at the
// point where it announces the change (the signal it publishes); the
// Meta of each node answers its mtime from it (Meta.Changed). Nothing is
// stored: a part that has not changed since the room started shows the
// room's start, or a later floor the room gives (the part's creation), so
// a change made before a restart shows as the restart. A part is any
// name the room chooses (a namespace path); a part with a trailing "/*"
// stands for everything under its prefix.
type Changes struct {
	start time.Time

	mu sync.Mutex // guards at and last
	at map[string]time.Time
	// last is the latest time handed out by Touch: times only grow, even
	// when the wall clock steps back or two touches fall on one tick.
	last time.Time
}

// NewChanges returns an empty Changes started now.
func NewChanges() *Changes {
	return &Changes{start: time.Now(), at: map[string]time.Time{}}
}

// Touch records that the parts changed now.
func (c *Changes) Touch(parts ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := time.Now()
	if !t.After(c.last) {
		t = c.last.Add(time.Nanosecond)
	}
	c.last = t
	for _, p := range parts {
		c.at[p] = t
	}
}

// At returns when the latest of parts last changed: the latest time any of
// them was touched, else floor if it is after the start, else the start.
func (c *Changes) At(floor time.Time, parts ...string) time.Time {
	t := c.start
	if floor.After(t) {
		t = floor
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range parts {
		if at, ok := c.at[p]; ok && at.After(t) {
			t = at
		}
	}
	return t
}

// Forget drops every part that begins with prefix (the parts of a thing
// that is gone).
func (c *Changes) Forget(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for p := range c.at {
		if strings.HasPrefix(p, prefix) {
			delete(c.at, p)
		}
	}
}
