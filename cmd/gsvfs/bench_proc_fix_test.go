package main

// What-if trees of BenchmarkHistoryCat (see bench_proc_test.go), mounted
// with our FUSE binding like the real tree:
//
//   - history: proc's history file as the recommended fix would make it.
//     The real one (proc.histReader) pages with the proc.history syscall,
//     and proc.(*Manager).history calls m.conv for every page, which
//     counts every message of the conversation (SELECT count(*) over the
//     whole generation): 100 pages x 100,000 index entries. Here each page
//     makes the same queries minus that count (the process lookup, the
//     conversation's generation, one page of 1000 rows by id), and renders
//     each line by hand (the stored content is already compact JSON)
//     instead of with a json.Encoder per message. Its bytes are checked
//     against the real file's.
//   - history.mem: the same bytes served from memory by a vfs.Sequential:
//     our FUSE binding's own cost (direct I/O), with no rendering at all.

import (
	"bytes"
	"context"
	"database/sql"
	"io/fs"
	"strconv"

	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// fixedHistPage is proc's historyPage.
const fixedHistPage = 1000

type fixedHistReader struct {
	db    *sql.DB
	pid   string
	after int64
	done  bool
	buf   bytes.Buffer
}

func (r *fixedHistReader) Read(ctx context.Context, p []byte) (int, error) {
	for r.buf.Len() == 0 && !r.done {
		// The caller's process (lookup) and the conversation (no count).
		var uid uint32
		if err := r.db.QueryRowContext(ctx, `SELECT uid FROM proc_processes WHERE pid=?`, r.pid).Scan(&uid); err != nil {
			return 0, err
		}
		var gen int64
		if err := r.db.QueryRowContext(ctx, `SELECT generation FROM proc_conversations WHERE pid=? AND cid=?`, r.pid, "default").Scan(&gen); err != nil {
			return 0, err
		}
		rows, err := r.db.QueryContext(ctx, `SELECT id,role,content,created_at FROM proc_messages WHERE pid=? AND cid=? AND generation=? AND id>? ORDER BY id LIMIT ?`,
			r.pid, "default", gen, r.after, fixedHistPage)
		if err != nil {
			return 0, err
		}
		n := 0
		var line []byte
		for rows.Next() {
			var id, ts int64
			var role string
			var content sql.RawBytes
			if err := rows.Scan(&id, &role, &content, &ts); err != nil {
				rows.Close()
				return 0, err
			}
			line = append(line[:0], `{"id":`...)
			line = strconv.AppendInt(line, id, 10)
			line = append(line, `,"role":`...)
			line = strconv.AppendQuote(line, role) // roles are plain ASCII words
			line = append(line, `,"content":`...)
			line = append(line, content...)
			line = append(line, `,"timestamp":`...)
			line = strconv.AppendInt(line, ts, 10)
			line = append(line, "}\n"...)
			r.buf.Write(line)
			r.after = id
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
		if n < fixedHistPage {
			r.done = true
		}
	}
	if r.buf.Len() == 0 {
		return 0, nil
	}
	return r.buf.Read(p)
}

func (r *fixedHistReader) Close() error { return nil }

type memReader struct{ r *bytes.Reader }

func (m *memReader) Read(ctx context.Context, p []byte) (int, error) {
	n, _ := m.r.Read(p)
	return n, nil
}

func (m *memReader) Close() error { return nil }

// fixedHistoryTree is a root with history (the fixed reader over pid's
// default conversation in k's store) and history.mem (data from memory).
func fixedHistoryTree(k *kernel.Kernel, pid string, data []byte) vfs.Dir {
	return vfs.NewDir(kernel.RootMeta("/", fs.ModeDir|0o555),
		vfs.DirEntry{Name: "history", Node: &vfs.Sequential{Meta: kernel.RootMeta("/history", 0o444),
			Open_: func(ctx context.Context, cred vfs.Cred) (vfs.Reader, error) {
				return &fixedHistReader{db: k.Store.R, pid: pid}, nil
			}}},
		vfs.DirEntry{Name: "history.mem", Node: &vfs.Sequential{Meta: kernel.RootMeta("/history.mem", 0o444),
			Open_: func(ctx context.Context, cred vfs.Cred) (vfs.Reader, error) {
				return &memReader{r: bytes.NewReader(data)}, nil
			}}},
	)
}
