package proc

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The render cache: the history and transcript files of /proc are real
// files that proc keeps under STATE/cache/proc, one per conversation and
// kind, outside the data tree (no user reaches them by path). They are
// derived state: the store is the truth, the directory is wiped when the
// Manager starts, and every open brings the file up to date with the store
// before handing it out (proc.history.open). Reading is then the operating
// system's: the FUSE binding lets the kernel read the file itself
// (passthrough), 9P reads it with pread.
//
// Bringing a file up to date appends the messages it lacks. Message ids
// grow in commit order (one writer connection; a group commit makes a
// batch visible at once), so within one generation the messages with an id
// above the last one rendered are exactly those added since, except after
// a compaction, which deletes a range and puts its summary at an id inside
// it: it increments the conversation's epoch. A new generation (reset,
// kill) or epoch starts a new file; the old one is unlinked, and readers
// that have it open keep reading it.
//
// A file's mtime is the conversation's updated_at when the file last
// changed (set after each update that wrote to it): when a message landed,
// or the compaction or reset that began the file.

// renderKinds are the renderings the cache keeps, by name.
var renderKinds = map[string]func(*bytes.Buffer, *abi.Message){
	"history":    renderJSONLine,
	"transcript": renderTranscript,
}

// renderChunk is how much rendered text is gathered before it is written:
// writes end at message boundaries, so a reader never sees part of a
// message that is not being written at that moment.
const renderChunk = 64 << 10

// renderCache is the Manager's cache of rendered conversations.
type renderCache struct {
	st  *kernel.Store
	dir string
	seq atomic.Uint64 // names new files

	mu      sync.Mutex // guards entries
	entries map[renderKey]*renderEntry
}

type renderKey struct{ pid, cid, kind string }

// renderEntry is what the cache knows of one file. Its mutex serialises
// the opens of the key.
type renderEntry struct {
	mu    sync.Mutex // guards the fields below and the file: one open of the key at a time
	path  string     // "" until the first open
	gen   int64      // the conversation's generation and epoch it renders
	epoch int64
	last  int64 // the id of the last message rendered (0: none)
	size  int64 // the bytes of the messages through last
}

// newRenderCache wipes dir (a cache left by an earlier run) and returns an
// empty cache there.
func newRenderCache(st *kernel.Store, dir string) (*renderCache, error) {
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("proc: render cache: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("proc: render cache: %w", err)
	}
	return &renderCache{st: st, dir: dir, entries: map[renderKey]*renderEntry{}}, nil
}

// openRenderCache makes the render cache, in STATE/cache/proc.
func (m *Manager) openRenderCache() error {
	c, err := newRenderCache(m.st, filepath.Join(m.k.StateDir(), "cache", "proc"))
	if err != nil {
		return err
	}
	m.cache = c
	return nil
}

// sysHistoryOpen serves proc.history.open (Internal): a conversation's
// rendering (history or transcript), up to date as of the call, as a file
// opened for reading. /proc's history and transcript files call it at
// open.
func (m *Manager) sysHistoryOpen(ctx context.Context, c *kernel.Caller, a *abi.HistoryOpenArgs) (*os.File, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	return m.cache.open(ctx, p.Pid, orDefault(a.ConversationID), a.Kind)
}

// open brings the rendering kind of conversation cid of pid up to date and
// returns it opened for reading.
func (c *renderCache) open(ctx context.Context, pid, cid, kind string) (*os.File, error) {
	render := renderKinds[kind]
	if render == nil {
		return nil, abi.E(abi.Invalid, fmt.Sprintf("unknown rendering %q (want history or transcript)", kind))
	}
	k := renderKey{pid, cid, kind}
	c.mu.Lock()
	e := c.entries[k]
	if e == nil {
		e = &renderEntry{}
		c.entries[k] = e
	}
	c.mu.Unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	for try := 0; ; try++ {
		if err := c.update(ctx, e, k, render); err != nil {
			return nil, err
		}
		f, err := os.Open(e.path)
		if errors.Is(err, os.ErrNotExist) && try == 0 {
			e.path = "" // removed behind our back: render it again
			continue
		}
		if err != nil {
			return nil, abi.E(abi.Path(pid+"/"+cid), err)
		}
		return f, nil
	}
}

// update brings e's file up to date with one snapshot of the store (one
// read transaction): a new file if the generation or epoch changed, then
// the messages after e.last, a page at a time. Progress is kept page by
// page; a failure cuts the file back to the last whole page.
func (c *renderCache) update(ctx context.Context, e *renderEntry, k renderKey, render func(*bytes.Buffer, *abi.Message)) (err error) {
	tx, err := c.st.BeginRead(ctx)
	if err != nil {
		return abi.E(abi.Path(k.pid+"/"+k.cid), err)
	}
	defer tx.Rollback()
	var gen, epoch, updated int64
	err = tx.QueryRowContext(ctx, `SELECT generation,epoch,updated_at FROM proc_conversations WHERE pid=? AND cid=?`, k.pid, k.cid).Scan(&gen, &epoch, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return abi.E(abi.Path(k.pid+"/"+k.cid), abi.NotExist, "no such conversation")
	}
	if err != nil {
		return abi.E(abi.Path(k.pid+"/"+k.cid), err)
	}
	var f *os.File // opened for writing at the first message to add
	defer func() {
		if f == nil {
			return
		}
		if err != nil {
			f.Truncate(e.size) // back to the last whole page
		}
		if cerr := f.Close(); cerr != nil && err == nil {
			err = abi.E(cerr)
		}
		if err == nil {
			// The file changed: its mtime is when the conversation did.
			t := time.UnixMilli(updated)
			os.Chtimes(e.path, t, t)
		}
	}()
	if e.path == "" || gen != e.gen || epoch != e.epoch {
		name := fmt.Sprintf("%d.%s.%s.%s", c.seq.Add(1), fileSafe(k.pid), fileSafe(k.cid), k.kind)
		path := filepath.Join(c.dir, name)
		nf, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return abi.E(abi.Path(k.pid+"/"+k.cid), err)
		}
		if e.path != "" {
			os.Remove(e.path) // open readers keep theirs
		}
		e.path, e.gen, e.epoch, e.last, e.size = path, gen, epoch, 0, 0
		f = nf
	}
	var (
		buf     bytes.Buffer
		msg     abi.Message
		content sql.RawBytes
	)
	for {
		rows, err := tx.QueryContext(ctx, `SELECT `+msgColumns+` FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id>? ORDER BY id LIMIT ?`,
			k.pid, k.cid, gen, e.last, historyPage)
		if err != nil {
			return abi.E(abi.Path(k.pid+"/"+k.cid), err)
		}
		n, last, off := 0, e.last, e.size
		write := func() error {
			if f == nil {
				var err error
				if f, err = os.OpenFile(e.path, os.O_WRONLY, 0); err != nil {
					return err
				}
			}
			_, err := f.WriteAt(buf.Bytes(), off)
			off += int64(buf.Len())
			buf.Reset()
			return err
		}
		for rows.Next() {
			if err := scanMessage(rows, &msg, &content); err != nil {
				rows.Close()
				return abi.E(abi.Path(k.pid+"/"+k.cid), err)
			}
			msg.Content = json.RawMessage(content)
			render(&buf, &msg)
			last = msg.ID
			n++
			if buf.Len() >= renderChunk {
				if err := write(); err != nil {
					rows.Close()
					return abi.E(abi.Path(k.pid+"/"+k.cid), err)
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return abi.E(abi.Path(k.pid+"/"+k.cid), err)
		}
		if buf.Len() > 0 {
			if err := write(); err != nil {
				return abi.E(abi.Path(k.pid+"/"+k.cid), err)
			}
		}
		e.last, e.size = last, off
		if n < historyPage {
			return nil
		}
	}
}

// fileSafe keeps a pid readable in a file name.
func fileSafe(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}
