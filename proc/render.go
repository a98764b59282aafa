package proc

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
	"gsvfs.dev/gsvfs/vfs"
)

// historyPage is how many messages a page of proc.history holds when a
// whole history is rendered (the checkpoint, the render cache).
const historyPage = 1000

// renderHistory renders generation gen of conversation cid of pid, message
// by message, by paging proc.history by message id as c. (The checkpoint
// renders with it; /proc's history files are cache.go's.)
func (m *engine) renderHistory(ctx context.Context, c *kernel.Caller, pid, cid string, gen int64, render func(*bytes.Buffer, *abi.Message)) ([]byte, error) {
	var b bytes.Buffer
	var after int64
	for {
		res, err := kernel.Do(ctx, m.k, c, abi.ProcHistory,
			&abi.HistoryArgs{Pid: pid, ConversationID: cid, Limit: historyPage, AfterID: &after, Generation: &gen})
		if err != nil {
			return nil, err
		}
		msgs := res.Messages
		for i := range msgs {
			render(&b, &msgs[i])
			after = msgs[i].ID
		}
		if len(msgs) < historyPage {
			return b.Bytes(), nil
		}
	}
}

// renderJSONLine renders a message as one JSON line of history, as
// json.Marshal(msg) would: the stored content is compact JSON already and
// is copied as it is.
func renderJSONLine(b *bytes.Buffer, msg *abi.Message) {
	b.WriteString(`{"id":`)
	b.WriteString(strconv.FormatInt(msg.ID, 10))
	b.WriteString(`,"role":`)
	rb, _ := json.Marshal(msg.Role)
	b.Write(rb)
	b.WriteString(`,"content":`)
	if json.Valid(msg.Content) {
		b.Write(msg.Content)
	} else {
		b.WriteString("null")
	}
	b.WriteString(`,"timestamp":`)
	b.WriteString(strconv.FormatInt(msg.Timestamp, 10))
	if msg.Kind != "" {
		b.WriteString(`,"kind":`)
		kb, _ := json.Marshal(msg.Kind)
		b.Write(kb)
	}
	if msg.Source != nil {
		b.WriteString(`,"source":`)
		sb, _ := json.Marshal(msg.Source)
		b.Write(sb)
	}
	if msg.TraceID != "" {
		b.WriteString(`,"traceId":`)
		tb, _ := json.Marshal(msg.TraceID)
		b.Write(tb)
	}
	if len(msg.Media) > 0 {
		b.WriteString(`,"media":`)
		mb, _ := json.Marshal(msg.Media)
		b.Write(mb)
	}
	b.WriteString("}\n")
}

// sourceText is how a transcript names a message's source: "alice",
// "process p_1", "kernel".
func sourceText(s *abi.EventSource) string {
	switch {
	case s == nil:
		return ""
	case s.Kind == "process":
		return "process " + s.Pid
	case s.Username != "":
		return s.Username
	case s.Kind == "user":
		return "uid " + strconv.FormatUint(uint64(s.Uid), 10)
	}
	return s.Kind
}

// renderTranscript renders a message as text a person reads. A message
// whose content does not decode as its role's is shown as its raw JSON.
func renderTranscript(b *bytes.Buffer, msg *abi.Message) {
	t := time.UnixMilli(msg.Timestamp).UTC().Format("2006-01-02 15:04:05")
	raw := func() { fmt.Fprintf(b, "[%s] #%d %s:\n%s\n\n", t, msg.ID, msg.Role, msg.Content) }
	switch msg.Role {
	case "user", "system":
		var s string
		if json.Unmarshal(msg.Content, &s) != nil {
			raw()
			return
		}
		what := msg.Role
		if msg.Kind != "" {
			what += " (" + msg.Kind
			if src := sourceText(msg.Source); src != "" {
				what += " from " + src
			}
			if msg.TraceID != "" {
				what += ", trace " + msg.TraceID
			}
			what += ")"
		}
		for _, mm := range msg.Media {
			s += "\n" + model.Media{Type: mm.Type, MimeType: mm.MimeType, Path: mm.Path, URL: mm.URL, Filename: mm.Filename,
				Size: mm.Size, Duration: mm.Duration, Transcription: mm.Transcription}.Placeholder()
		}
		fmt.Fprintf(b, "[%s] #%d %s:\n%s\n\n", t, msg.ID, what, s)
	case "assistant":
		var ac assistantContent
		if json.Unmarshal(msg.Content, &ac) != nil {
			raw()
			return
		}
		fmt.Fprintf(b, "[%s] #%d assistant:\n", t, msg.ID)
		if ac.Text != "" {
			fmt.Fprintf(b, "%s\n", ac.Text)
		}
		for _, c := range ac.ToolCalls {
			fmt.Fprintf(b, "  -> %s %s (%s)\n", c.Name, c.Args, c.ID)
		}
		b.WriteByte('\n')
	case "toolResult":
		var tr toolResultContent
		if json.Unmarshal(msg.Content, &tr) != nil {
			raw()
			return
		}
		out := tr.Output
		if len(out) > 2000 {
			out = out[:2000] + fmt.Sprintf("... [%d bytes]", len(tr.Output))
		}
		mark := ""
		if tr.IsError {
			mark = " (error)"
		}
		fmt.Fprintf(b, "[%s] #%d %s result%s:\n%s\n\n", t, msg.ID, tr.ToolName, mark, strings.TrimRight(out, "\n"))
	}
}

// segmentReader streams a segment's archived messages (JSON lines) from
// its archive, read as the caller: the segment must be the caller's and
// the archive readable by them.
func (m *Manager) segmentReader(ctx context.Context, c *kernel.Caller, pid, cid, segID string) (vfs.Reader, error) {
	res, err := kernel.Do(ctx, m.k, c, abi.ProcConversationSegments, &abi.ConvArgs{Pid: pid, ConversationID: cid})
	if err != nil {
		return nil, err
	}
	for _, s := range res.Segments {
		if s.ID != segID {
			continue
		}
		f, err := kernel.Do(ctx, m.k, c, abi.FsOpenread, &abi.FileArgs{Path: s.ArchivePath})
		if err != nil {
			return nil, err
		}
		zr, err := gzip.NewReader(f)
		if err != nil {
			f.Close()
			return nil, abi.E(abi.Path(s.ArchivePath), err)
		}
		return &gzReader{f: f, zr: zr}, nil
	}
	return nil, abi.E(abi.Path(segID), abi.NotExist, "no such segment")
}

// segmentSize is the length of a segment's messages as its file shows
// them, read from the end of its gzip archive (the uncompressed length
// that gzip records, modulo 4 GiB: an archive is one gzip member, written
// once by writeArchive), as the caller c: a stat's size, found without
// decompressing.
func (m *Manager) segmentSize(ctx context.Context, c *kernel.Caller, archive string) (int64, error) {
	f, err := kernel.Do(ctx, m.k, c, abi.FsOpenread, &abi.FileArgs{Path: archive})
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if fi.Size() < 18 { // a gzip header and trailer
		return 0, abi.E(abi.Path(archive), "not a gzip archive")
	}
	var tail [4]byte
	if _, err := f.ReadAt(tail[:], fi.Size()-4); err != nil {
		return 0, abi.E(abi.Path(archive), err)
	}
	return int64(binary.LittleEndian.Uint32(tail[:])), nil
}

type gzReader struct {
	f  *os.File
	zr *gzip.Reader
}

func (r *gzReader) Read(ctx context.Context, p []byte) (int, error) {
	n, err := r.zr.Read(p)
	if n > 0 || err == nil || errors.Is(err, io.EOF) {
		return n, nil
	}
	return 0, err
}

func (r *gzReader) Close() error { return r.f.Close() }
