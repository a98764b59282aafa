package vfs

import (
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want error
	}{
		{"a", nil},
		{"file.txt", nil},
		{".hidden", nil},
		{"...", nil},
		{"a b", nil},
		{"évian ☃", nil},
		{"new\nline", nil}, // a tree's own rule may refuse it
		{strings.Repeat("x", MaxName), nil},
		{strings.Repeat("é", MaxName/2), nil},
		{"", ErrBadName},
		{".", ErrBadName},
		{"..", ErrBadName},
		{"/", ErrBadName},
		{"a/b", ErrBadName},
		{"a/", ErrBadName},
		{"/a", ErrBadName},
		{"a\x00b", ErrBadName},
		{"\xff", ErrBadName},
		{"a\xc3", ErrBadName},
		{strings.Repeat("x", MaxName+1), ErrNameTooLong},
		{strings.Repeat("/", MaxName+1), ErrNameTooLong},
	} {
		if got := CheckName(tc.name); got != tc.want {
			t.Errorf("CheckName(%.40q) = %v, want %v", tc.name, got, tc.want)
		}
	}
	if Errno(ErrBadName) != 22 || Errno(ErrNameTooLong) != 36 {
		t.Errorf("errnos %d and %d, want EINVAL and ENAMETOOLONG", Errno(ErrBadName), Errno(ErrNameTooLong))
	}
}

// FuzzCheckName: a name CheckName takes is exactly one path element,
// which no join can make climb or split.
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"", "a", ".", "..", "a/b", "a\x00", "\xff", "...", strings.Repeat("x", 256)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := CheckName(name)
		if err != nil {
			if err != ErrBadName && err != ErrNameTooLong {
				t.Fatalf("CheckName(%q) = %v, not one of its errors", name, err)
			}
			return
		}
		if len(name) == 0 || len(name) > MaxName || !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
			t.Fatalf("CheckName(%q) took it", name)
		}
		if j := path.Join("/d", name); path.Dir(j) != "/d" || path.Base(j) != name {
			t.Fatalf("CheckName(%q) took a name that is not one element: %q", name, j)
		}
	})
}
