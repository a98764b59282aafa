package abi

import (
	"bytes"
	"encoding/json"
	"io/fs"
)

// The fs.* syscalls: the seed's file tools (fs.read, fs.write, fs.edit,
// fs.delete, fs.search), routable to a device by Target. A result whose
// OK is false is the operation's own failure, {ok:false, error}: the
// syscall itself succeeded (a frame error is kept for routing, permission
// to make the call, and malformed args).

// FSReadArgs are the args of fs.read: a file's lines from Offset (0-based),
// at most Limit of them (0: all), or a directory's listing. Raw (ours)
// asks for the lines as they are, unnumbered: CodeMode's fs.read gives a
// block the file's bytes (the model's Read tool keeps the numbered form).
type FSReadArgs struct {
	Target string `json:"target,omitempty"`
	Path   string `json:"path"`
	Offset int    `json:"offset,omitempty"`
	Limit  int    `json:"limit,omitempty"`
	Raw    bool   `json:"raw,omitempty"`
}

// FSReadResult is fs.read's result. For a file (Dir false): Content holds
// the lines asked for, each numbered ("%6d\t"; with Raw, as they are in
// the file, the last one's newline or its lack included), Lines the
// file's line count and Size its bytes. For a directory (Dir true): the names of its
// Files (regular files, or other non-directories the namespace shows) and
// Directories. For an image file (a PNG, JPEG, GIF or WebP by its
// content, not its name; ImageTypes): Image, and content is the seed's
// block list, [{"type":"image","data":<base64>,"mimeType":...}].
type FSReadResult struct {
	OK          bool     `json:"ok"`
	Error       string   `json:"error,omitempty"`
	Path        string   `json:"path,omitempty"`
	Dir         bool     `json:"-"`
	Files       []string `json:"files,omitempty"`
	Directories []string `json:"directories,omitempty"`
	Content     string   `json:"content,omitempty"`
	Lines       int      `json:"lines,omitempty"`
	Size        int64    `json:"size,omitempty"`
	// Image is an image file's content (Content is then empty).
	Image *ImageBlock `json:"-"`
}

// ImageBlock is an image as a content block of the seed's: its bytes in
// base64 (standard, padded) and its mime type (one of ImageTypes).
type ImageBlock struct {
	Type     string `json:"type"` // "image"
	Data     string `json:"data"`
	MimeType string `json:"mimeType"`
}

// MarshalJSON writes the failure, the listing or the file, each with
// exactly its own keys.
func (r FSReadResult) MarshalJSON() ([]byte, error) {
	switch {
	case !r.OK:
		return failed(r.Error)
	case r.Dir:
		files, dirs := r.Files, r.Directories
		if files == nil {
			files = []string{}
		}
		if dirs == nil {
			dirs = []string{}
		}
		return json.Marshal(struct {
			Directories []string `json:"directories"`
			Files       []string `json:"files"`
			OK          bool     `json:"ok"`
			Path        string   `json:"path"`
		}{dirs, files, true, r.Path})
	case r.Image != nil:
		return json.Marshal(struct {
			Content []ImageBlock `json:"content"`
			OK      bool         `json:"ok"`
			Path    string       `json:"path"`
			Size    int64        `json:"size"`
		}{[]ImageBlock{*r.Image}, true, r.Path, r.Size})
	}
	return json.Marshal(struct {
		Content string `json:"content"`
		Lines   int    `json:"lines"`
		OK      bool   `json:"ok"`
		Path    string `json:"path"`
		Size    int64  `json:"size"`
	}{r.Content, r.Lines, true, r.Path, r.Size})
}

// UnmarshalJSON reads any of the three shapes; a listing (an object with
// the key "files") sets Dir.
func (r *FSReadResult) UnmarshalJSON(b []byte) error {
	type plain FSReadResult
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		// An image's content is a block list, not a string.
		var img struct {
			OK      bool         `json:"ok"`
			Error   string       `json:"error"`
			Path    string       `json:"path"`
			Size    int64        `json:"size"`
			Content []ImageBlock `json:"content"`
		}
		if json.Unmarshal(b, &img) != nil || len(img.Content) != 1 || img.Content[0].Type != "image" {
			return err
		}
		*r = FSReadResult{OK: img.OK, Error: img.Error, Path: img.Path, Size: img.Size, Image: &img.Content[0], Dir: hasTopKey(b, "files")}
		return nil
	}
	p.Dir = hasTopKey(b, "files")
	*r = FSReadResult(p)
	return nil
}

// hasTopKey reports whether b, valid JSON, is an object with the key
// (once unescaped, as a map decodes it) at its top level. It reads the
// keys where they are, decoding nothing else: a read's answer is decoded
// once, not again into a map of its values.
func hasTopKey(b []byte, key string) bool {
	i := skipSpace(b, 0)
	if i == len(b) || b[i] != '{' {
		return false
	}
	for i++; ; {
		i = skipSpace(b, i)
		if i == len(b) || b[i] == '}' {
			return false
		}
		if b[i] == ',' {
			i++
			continue
		}
		j := endString(b, i)
		if k := b[i:j]; bytes.IndexByte(k, '\\') < 0 {
			if len(k) >= 2 && string(k[1:len(k)-1]) == key {
				return true
			}
		} else if s := ""; json.Unmarshal(k, &s) == nil && s == key {
			return true
		}
		i = skipSpace(b, j)
		if i < len(b) && b[i] == ':' {
			i++
		}
		i = skipValue(b, skipSpace(b, i))
	}
}

// skipSpace is the index of the first byte of b from i that is not JSON
// white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endString is the index after the JSON string that begins at i.
func endString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue is the index after the JSON value that begins at i.
func skipValue(b []byte, i int) int {
	if i == len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return endString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = endString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}

// FSWriteArgs are the args of fs.write: replace (or create, with its
// missing parent directories) the file Path with Content.
type FSWriteArgs struct {
	Target  string `json:"target,omitempty"`
	Path    string `json:"path"`
	Content string `json:"content"`
}

// FSWriteResult is fs.write's result: the file's path and the bytes
// written.
type FSWriteResult struct {
	Error string `json:"error,omitempty"`
	OK    bool   `json:"ok"`
	Path  string `json:"path"`
	Size  int    `json:"size"`
}

// MarshalJSON writes {ok:false, error} for a failure.
func (r FSWriteResult) MarshalJSON() ([]byte, error) {
	if !r.OK {
		return failed(r.Error)
	}
	type plain FSWriteResult
	return json.Marshal(plain(r))
}

// FSEditArgs are the args of fs.edit: replace OldString (which must occur
// once, unless ReplaceAll) by NewString in the file Path.
type FSEditArgs struct {
	Target     string `json:"target,omitempty"`
	Path       string `json:"path"`
	OldString  string `json:"oldString"`
	NewString  string `json:"newString"`
	ReplaceAll bool   `json:"replaceAll,omitempty"`
}

// FSEditResult is fs.edit's result: how many replacements were made.
type FSEditResult struct {
	Error        string `json:"error,omitempty"`
	OK           bool   `json:"ok"`
	Path         string `json:"path"`
	Replacements int    `json:"replacements"`
}

// MarshalJSON writes {ok:false, error} for a failure.
func (r FSEditResult) MarshalJSON() ([]byte, error) {
	if !r.OK {
		return failed(r.Error)
	}
	type plain FSEditResult
	return json.Marshal(plain(r))
}

// FSDeleteArgs are the args of fs.delete: remove Path and, for a
// directory, everything in it.
type FSDeleteArgs struct {
	Target string `json:"target,omitempty"`
	Path   string `json:"path"`
}

// FSDeleteResult is fs.delete's result.
type FSDeleteResult struct {
	Error string `json:"error,omitempty"`
	OK    bool   `json:"ok"`
	Path  string `json:"path"`
}

// MarshalJSON writes {ok:false, error} for a failure.
func (r FSDeleteResult) MarshalJSON() ([]byte, error) {
	if !r.OK {
		return failed(r.Error)
	}
	type plain FSDeleteResult
	return json.Marshal(plain(r))
}

// FSSearchArgs are the args of fs.search: the lines holding Query, in the
// files under Path (default: the caller's cwd) whose names match the
// pattern Include (path.Match), if given.
type FSSearchArgs struct {
	Target  string `json:"target,omitempty"`
	Query   string `json:"query"`
	Path    string `json:"path,omitempty"`
	Include string `json:"include,omitempty"`
}

// FSMatch is one line fs.search found: its file, its number (from 1) and
// its text.
type FSMatch struct {
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Content string `json:"content"`
}

// FSSearchResult is fs.search's result: the matches (at most 500; then
// Truncated is set) and their count.
type FSSearchResult struct {
	Count     int       `json:"count"`
	Error     string    `json:"error,omitempty"`
	Matches   []FSMatch `json:"matches"`
	OK        bool      `json:"ok"`
	Truncated bool      `json:"truncated,omitempty"`
}

// MarshalJSON writes {ok:false, error} for a failure.
func (r FSSearchResult) MarshalJSON() ([]byte, error) {
	if !r.OK {
		return failed(r.Error)
	}
	type plain FSSearchResult
	if r.Matches == nil {
		r.Matches = []FSMatch{}
	}
	return json.Marshal(plain(r))
}

// FileArgs name a file of the data tree by its namespace path, for the
// internal syscalls fs.openread, fs.create and fs.readraw with which
// subsystems read and write real files (archives, context files) through
// the dispatcher. They are Go values, never JSON.
type FileArgs struct {
	Path string
	// Perm is the mode of a file fs.create makes; its missing parent
	// directories get Perm with search bits added.
	Perm fs.FileMode
	// Max, if positive, is the largest file fs.readraw returns (else 25
	// MiB); a larger file is a 400.
	Max int64
}

// failed is the JSON of an operation's own failure: {error, ok:false}.
func failed(msg string) ([]byte, error) {
	return json.Marshal(struct {
		Error string `json:"error"`
		OK    bool   `json:"ok"`
	}{msg, false})
}
