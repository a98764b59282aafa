package repos

import (
	"strings"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// The bounds of names and paths.
const (
	maxName    = 100  // a repository's or owner's name
	maxRefName = 255  // a ref or revision
	maxPath    = 4096 // a path inside a tree
)

// validName reports whether s may name an owner or a repository: 1-100
// of [A-Za-z0-9._-], not beginning with '.' or '-', not ending in .git
// or .lock.
func validName(s string) bool {
	if s == "" || len(s) > maxName || s[0] == '.' || s[0] == '-' {
		return false
	}
	if strings.HasSuffix(s, ".git") || strings.HasSuffix(s, ".lock") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// splitRepo reads "owner/name", or "name" alone as the caller's own
// (self), and checks both names.
func splitRepo(repo, self string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok {
		owner, name = self, repo
	}
	if !validName(owner) || !validName(name) {
		return "", "", abi.E(abi.Invalid, abi.Path(clip(repo)), "a repository is owner/name, each 1-100 of A-Z a-z 0-9 . _ - (not beginning with . or -)")
	}
	return owner, name, nil
}

// cleanPath checks a path inside a tree and returns it without leading or
// trailing slashes: "" is the root. Its components are never empty, "."
// or "..", never .git (in any case), never hold a NUL or a control
// character, and the whole is valid UTF-8 of at most maxPath bytes. An
// absolute path is refused, as is a path that is not already clean.
func cleanPath(p string) (string, error) {
	if p == "" || p == "/" {
		return "", nil
	}
	bad := func(why string) error { return abi.E(abi.Invalid, abi.Path(clip(p)), "path "+why) }
	if len(p) > maxPath {
		return "", bad("too long")
	}
	if !utf8.ValidString(p) {
		return "", bad("is not UTF-8")
	}
	if p[0] == '/' {
		return "", bad("is absolute: give it relative to the tree's root")
	}
	p = strings.TrimSuffix(p, "/")
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "":
			return "", bad("has an empty component")
		case c == "." || c == "..":
			return "", bad("has a . or .. component")
		case strings.EqualFold(c, ".git"):
			return "", bad("has a .git component")
		}
		for _, r := range c {
			if r < 0x20 || r == 0x7f {
				return "", bad("has a control character")
			}
		}
	}
	return p, nil
}

// branchRef turns a ref a write names into a full branch ref name:
// "main" is refs/heads/main, refs/heads/x stays; anything else (a tag, a
// hash, HEAD) is refused, as is a name git's check-ref-format refuses.
func branchRef(ref string) (string, error) {
	if ref == "" {
		ref = "main"
	}
	full := ref
	if !strings.HasPrefix(ref, "refs/") {
		full = "refs/heads/" + ref
	}
	if !strings.HasPrefix(full, "refs/heads/") || !validRefName(full) {
		return "", abi.E(abi.Invalid, abi.Path(clip(ref)), "not a branch name git accepts")
	}
	return full, nil
}

// validRefName is git's check-ref-format for a full ref name (refs/...):
// components never empty, never beginning with '.', never ending in
// .lock; no "..", "@{", control characters, space, ~ ^ : ? * [ or \; not
// ending in '/' or '.'.
func validRefName(s string) bool {
	if len(s) > maxRefName || !strings.HasPrefix(s, "refs/") || strings.HasSuffix(s, "/") || strings.HasSuffix(s, ".") {
		return false
	}
	if strings.Contains(s, "..") || strings.Contains(s, "@{") || s == "@" {
		return false
	}
	for _, c := range strings.Split(s, "/") {
		if c == "" || c[0] == '.' || strings.HasSuffix(c, ".lock") {
			return false
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c == 0x7f || strings.IndexByte(" ~^:?*[\\", c) >= 0 {
			return false
		}
	}
	return true
}

// validRev reports whether s may be given to the revision parser: a ref
// name, a hash, or a revision such as HEAD~3 or main^2, of at most
// maxRefName bytes of printable ASCII with no "..", "@{" or blanks.
func validRev(s string) bool {
	if s == "" || len(s) > maxRefName || strings.Contains(s, "..") || strings.Contains(s, "@{") || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || strings.IndexByte(":?*[\\", c) >= 0 {
			return false
		}
	}
	return true
}

// clip bounds a user's text quoted back in an error.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
