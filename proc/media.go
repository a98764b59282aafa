package proc

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/proc/model"
	"gsvfs.dev/gsvfs/vfs"
)

// The media store: the bytes of the media that enter a user's
// conversations (proc.send's media, the images the Read tool gives the
// model), one file per content under STATE/media/<uid>/<sha256>.<ext>,
// 0600 of the daemon's. A message refers to its media by abi.MediaRef;
// the model gets the bytes from here at each call. /var/media/<user>
// shows a user's store, to that user (and root) only.

// mediaDir is where the store is bound in the namespace.
const mediaDir = "/var/media"

// mediaStore is the media files of every user, under dir.
type mediaStore struct{ dir string }

// mediaName is the file name of content sum (hex) of mime type mt.
func mediaName(sum, mt string) string { return sum + "." + abi.MediaExt(mt) }

// validMediaName reports whether name is a store's file name: 64
// lowercase hex digits, a dot and an extension of letters and digits.
func validMediaName(name string) bool {
	sum, ext, ok := strings.Cut(name, ".")
	if !ok || len(sum) != 64 || ext == "" || len(ext) > 8 {
		return false
	}
	for _, r := range sum {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	for _, r := range ext {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z') {
			return false
		}
	}
	return true
}

// userDir is uid's directory of the store.
func (s *mediaStore) userDir(uid uint32) string {
	return filepath.Join(s.dir, strconv.FormatUint(uint64(uid), 10))
}

// put keeps b, of mime type mt, in uid's store and returns its SHA-256
// (hex) and file name. The same content of the same type is kept once:
// a put of a file already there changes nothing.
func (s *mediaStore) put(uid uint32, b []byte, mt string) (sum, name string, err error) {
	h := sha256.Sum256(b)
	sum = hex.EncodeToString(h[:])
	name = mediaName(sum, mt)
	dir := s.userDir(uid)
	final := filepath.Join(dir, name)
	if _, err := os.Stat(final); err == nil {
		return sum, name, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	f, err := os.CreateTemp(dir, ".put-*")
	if err != nil {
		return "", "", err
	}
	defer os.Remove(f.Name()) // a no-op once renamed
	if _, err := f.Write(b); err != nil {
		f.Close()
		return "", "", err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", "", err
	}
	if err := f.Close(); err != nil {
		return "", "", err
	}
	return sum, name, os.Rename(f.Name(), final)
}

// open opens file name of uid's store for reading.
func (s *mediaStore) open(uid uint32, name string) (*os.File, error) {
	if !validMediaName(name) {
		return nil, abi.E(abi.NotExist, abi.Path(name), "no such media file")
	}
	f, err := os.Open(filepath.Join(s.userDir(uid), name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, abi.E(abi.NotExist, abi.Path(name), "no such media file")
	}
	return f, err
}

// read returns the bytes of file name of uid's store, at most max.
func (s *mediaStore) read(uid uint32, name string, max int64) ([]byte, error) {
	f, err := s.open(uid, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > max {
		return nil, fmt.Errorf("%s: over %d bytes", name, max)
	}
	b := make([]byte, fi.Size())
	_, err = f.ReadAt(b, 0)
	return b, err
}

// used is the bytes of uid's files.
func (s *mediaStore) used(uid uint32) (int64, error) {
	files, err := s.list(uid)
	var n int64
	for _, f := range files {
		n += f.Size
	}
	return n, err
}

// DefaultMaxMediaMiB is how many MiB a user's media store may hold when
// config/proc/max_media_mib (or root's users/<uid>/proc/max_media_mib)
// does not say. Root's store has no limit.
const DefaultMaxMediaMiB = 1024

// list is uid's files, by name.
func (s *mediaStore) list(uid uint32) ([]abi.MediaFile, error) {
	ents, err := os.ReadDir(s.userDir(uid))
	if errors.Is(err, fs.ErrNotExist) {
		return []abi.MediaFile{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := []abi.MediaFile{}
	for _, e := range ents {
		if !validMediaName(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, abi.MediaFile{Name: e.Name(), Size: fi.Size(), Created: fi.ModTime().UnixMilli()})
	}
	return out, nil
}

// storeMedia checks media and keeps the bytes of each item in owner's
// store (its namespace path under /var/media/<username>), returning the
// references a message keeps. Bad media is a 400 and stores nothing.
func (m *engine) storeMedia(ctx context.Context, owner uint32, media []abi.MediaInput) ([]abi.MediaRef, error) {
	if len(media) == 0 {
		return nil, nil
	}
	in := slices.Clone(media)
	data, err := abi.CheckMedia(in)
	if err != nil {
		return nil, err
	}
	if err := m.mediaRoom(ctx, owner, data); err != nil {
		return nil, err
	}
	user := strconv.FormatUint(uint64(owner), 10)
	if u, err := m.k.UserOf(ctx, owner); err == nil {
		user = u.Username
	}
	refs := make([]abi.MediaRef, len(in))
	for i, it := range in {
		refs[i] = abi.MediaRef{Type: it.Type, MimeType: it.MimeType, URL: it.URL, Filename: it.Filename,
			Size: it.Size, Duration: it.Duration, Transcription: it.Transcription}
		if data[i] == nil {
			continue
		}
		sum, name, err := m.media.put(owner, data[i], it.MimeType)
		if err != nil {
			return nil, abi.E(abi.Other, fmt.Errorf("media[%d]: store: %w", i, err))
		}
		refs[i].Sha256, refs[i].Path = sum, mediaDir+"/"+user+"/"+name
	}
	return refs, nil
}

// mediaRoom checks that owner's store has room for data: a store at its
// limit (DefaultMaxMediaMiB, proc/max_media_mib) is a 409 naming the key.
// Sends at once may each pass and overshoot it by a message's media.
func (m *engine) mediaRoom(ctx context.Context, owner uint32, data [][]byte) error {
	if owner == 0 {
		return nil
	}
	var add int64
	for _, b := range data {
		add += int64(len(b))
	}
	if add == 0 {
		return nil
	}
	limit := int64(ns.Limit(ctx, m.k, m.log, owner, "proc/max_media_mib", DefaultMaxMediaMiB)) << 20
	used, err := m.media.used(owner)
	if err != nil {
		return abi.E(abi.Path(mediaDir), err)
	}
	if used+add > limit {
		return abi.E(abi.Busy, fmt.Sprintf("media: your media store holds %d bytes; %d more would pass its limit of %d MiB (proc/max_media_mib)", used, add, limit>>20))
	}
	return nil
}

// storeImage keeps an image a tool gave (fs.read of an image file) in
// owner's store and returns its reference.
func (m *engine) storeImage(ctx context.Context, owner uint32, img *abi.ImageBlock, filename string) ([]abi.MediaRef, error) {
	return m.storeMedia(ctx, owner, []abi.MediaInput{{Type: "image", MimeType: img.MimeType, Data: img.Data, Filename: filename}})
}

// modelMedia turns a message's references into the model's media: an
// image the providers take gets its bytes from owner's store (its type
// as its content says, http.DetectContentType); a missing or unreadable
// file, or any other item, reaches the model as its placeholder.
func (m *engine) modelMedia(owner uint32, refs []abi.MediaRef) []model.Media {
	out := make([]model.Media, len(refs))
	for i, r := range refs {
		mm := model.Media{Type: r.Type, MimeType: r.MimeType, Path: r.Path, URL: r.URL, Filename: r.Filename,
			Size: r.Size, Duration: r.Duration, Transcription: r.Transcription}
		if r.Type == "image" && r.Path != "" {
			if b, err := m.media.read(owner, filepath.Base(r.Path), abi.MaxMediaBytes); err == nil {
				if sniffed := http.DetectContentType(b); slices.Contains(abi.ImageTypes, sniffed) {
					mm.Data, mm.MimeType = b, sniffed
				}
			} else {
				m.log.Warn("proc: a message's media is not in the store", "uid", owner, "path", r.Path, "err", err)
			}
		}
		out[i] = mm
	}
	return out
}

// mediaColumn is refs as the media column stores them (NULL: none).
func mediaColumn(refs []abi.MediaRef) any {
	if len(refs) == 0 {
		return nil
	}
	b, _ := json.Marshal(refs)
	return string(b)
}

// nullString is a column value of mediaColumn's as a NullString.
func nullString(v any) sql.NullString {
	s, ok := v.(string)
	return sql.NullString{String: s, Valid: ok}
}

// mediaOf decodes a media column ("" or NULL: none).
func mediaOf(col string) []abi.MediaRef {
	if col == "" {
		return nil
	}
	var refs []abi.MediaRef
	if json.Unmarshal([]byte(col), &refs) != nil {
		return nil
	}
	return refs
}

// mayReadMedia checks that c may read uid's store: uid's own (a process
// of uid's too), or root.
func mayReadMedia(c *kernel.Caller, uid uint32) error {
	if c.Uid == uid && c.Role != "nobody" || c.IsRoot() {
		return nil
	}
	return abi.E(abi.Permission, "permission denied")
}

// sysMediaList serves proc.media.list (Internal): a.Uid's files, or the
// file a.Name alone (404 if there is none).
func (m *Manager) sysMediaList(ctx context.Context, c *kernel.Caller, a *abi.MediaFilesArgs) (*abi.MediaFilesResult, error) {
	if err := mayReadMedia(c, a.Uid); err != nil {
		return nil, err
	}
	if a.Name != "" {
		f, err := m.run.media.open(a.Uid, a.Name)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, abi.E(abi.Path(mediaDir), err)
		}
		return &abi.MediaFilesResult{Files: []abi.MediaFile{{Name: a.Name, Size: fi.Size(), Created: fi.ModTime().UnixMilli()}}}, nil
	}
	files, err := m.run.media.list(a.Uid)
	if err != nil {
		return nil, abi.E(abi.Path(mediaDir), err)
	}
	return &abi.MediaFilesResult{Files: files}, nil
}

// sysMediaOpen serves proc.media.open (Internal): a.Uid's file a.Name.
func (m *Manager) sysMediaOpen(ctx context.Context, c *kernel.Caller, a *abi.MediaFilesArgs) (*os.File, error) {
	if err := mayReadMedia(c, a.Uid); err != nil {
		return nil, err
	}
	return m.run.media.open(a.Uid, a.Name)
}

// mediaTree is /var/media: a directory per user the reader sees (as
// sys.user.list gives them), each its owner's, mode 0500, of files 0400;
// every listing and open is a syscall made as the reader.
func (m *Manager) mediaTree() vfs.Dir {
	users := func(ctx context.Context, cred vfs.Cred) []abi.User {
		res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.SysUserList, nil)
		if err != nil {
			return nil
		}
		return res.Users
	}
	return &vfs.FuncDir{Meta: ns.RootMeta(mediaDir, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			var out []vfs.DirEntry
			for _, u := range users(ctx, cred) {
				out = append(out, vfs.DirEntry{Name: u.Username, Node: m.mediaUserDir(ctx, u)})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			for _, u := range users(ctx, cred) {
				if u.Username == name {
					return m.mediaUserDir(ctx, u), nil
				}
			}
			return nil, vfs.ErrNotExist
		}}
}

// mediaUserDir is /var/media/<user>.
func (m *Manager) mediaUserDir(ctx context.Context, u abi.User) vfs.Dir {
	base := mediaDir + "/" + u.Username
	own := ns.UserMeta(ctx, m.k, u.Uid, u.Username)
	file := func(f abi.MediaFile) vfs.Node {
		meta := own.At(base+"/"+f.Name, 0o400).WithChanged(func(context.Context, vfs.Cred) time.Time { return time.UnixMilli(f.Created) })
		return &vfs.Backed{Meta: meta, OpenFile: func(ctx context.Context, cred vfs.Cred) (*os.File, error) {
			return kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcMediaOpen, &abi.MediaFilesArgs{Uid: u.Uid, Name: f.Name})
		}}
	}
	return &vfs.FuncDir{Meta: own.At(base, fs.ModeDir|0o500),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcMediaList, &abi.MediaFilesArgs{Uid: u.Uid})
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, len(res.Files))
			for i, f := range res.Files {
				out[i] = vfs.DirEntry{Name: f.Name, Node: file(f)}
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			res, err := kernel.Do(ctx, m.k, ns.CallerOf(cred, ""), abi.ProcMediaList, &abi.MediaFilesArgs{Uid: u.Uid, Name: name})
			if err != nil {
				return nil, err
			}
			return file(res.Files[0]), nil
		}}
}

// mediaWeight is what a media item counts for in a conversation's size
// (the context pressure): about 1,500 tokens, what a model takes for an
// image of a usual size.
const mediaWeight = 6000

// modelMessages loads the active messages of a conversation of a process
// of uid as model messages (their media from uid's store), and their
// stored size.
func (m *engine) modelMessages(ctx context.Context, uid uint32, pid, cid string, gen int64) ([]model.Message, int, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT id,role,content,media FROM proc_messages WHERE pid=? AND cid=? AND generation=? ORDER BY id`, pid, cid, gen)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out []model.Message
	size := 0
	for rows.Next() {
		var id int64
		var role, content string
		var media sql.NullString
		if err := rows.Scan(&id, &role, &content, &media); err != nil {
			return nil, 0, err
		}
		size += len(content)
		var err error
		switch role {
		case "user", "system":
			var s string
			err = json.Unmarshal([]byte(content), &s)
			refs := mediaOf(media.String)
			size += len(refs) * mediaWeight
			out = append(out, model.Message{Role: model.User, Content: s, Media: m.modelMedia(uid, refs)})
		case "assistant":
			var ac assistantContent
			err = json.Unmarshal([]byte(content), &ac)
			out = append(out, model.Message{Role: model.Assistant, Content: ac.Text, ToolCalls: ac.ToolCalls})
		case "toolResult":
			var tr toolResultContent
			err = json.Unmarshal([]byte(content), &tr)
			size += len(tr.Media) * mediaWeight
			out = append(out, model.Message{Role: model.Tool, Content: tr.Output, ToolCallID: tr.ToolCallID, ToolName: tr.ToolName, IsError: tr.IsError, Media: m.modelMedia(uid, tr.Media)})
		}
		if err != nil {
			return nil, 0, abi.E(abi.Path(pid+"/"+cid), abi.Other, fmt.Sprintf("message %d: %v", id, err))
		}
	}
	return out, size, rows.Err()
}

// imageReadResult is the output the model reads of an fs.read of an
// image file: the file, and where its image is kept; the image itself
// comes with the result (toolResultContent.Media).
type imageReadResult struct {
	OK    bool         `json:"ok"`
	Path  string       `json:"path"`
	Size  int64        `json:"size"`
	Image abi.MediaRef `json:"image"`
}
