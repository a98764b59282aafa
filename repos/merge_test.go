package repos

import (
	"reflect"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
)

// TestMerge3: a path only the branch changed is taken (a put or a
// delete); one both changed alike is nothing to take; one both changed
// differently is a conflict; a file where the other side has a directory
// is a conflict.
func TestMerge3(t *testing.T) {
	e := func(c byte) entry { return entry{mode: filemode.Regular, hash: plumbing.Hash{c}} }
	for _, tc := range []struct {
		name               string
		base, ours, theirs flatTree
		taken, conflicts   []string
		merged             flatTree
	}{
		{"theirs changes", flatTree{"a": e(1)}, flatTree{"a": e(1)}, flatTree{"a": e(2)}, []string{"a"}, nil, flatTree{"a": e(2)}},
		{"theirs adds, ours adds another", flatTree{}, flatTree{"o": e(1)}, flatTree{"t": e(2)}, []string{"t"}, nil, flatTree{"o": e(1), "t": e(2)}},
		{"theirs deletes", flatTree{"a": e(1), "b": e(1)}, flatTree{"a": e(1), "b": e(1)}, flatTree{"a": e(1)}, []string{"b"}, nil, flatTree{"a": e(1)}},
		{"both alike", flatTree{"a": e(1)}, flatTree{"a": e(2)}, flatTree{"a": e(2)}, nil, nil, flatTree{"a": e(2)}},
		{"both differ", flatTree{"a": e(1)}, flatTree{"a": e(2)}, flatTree{"a": e(3)}, nil, []string{"a"}, nil},
		{"ours deletes, theirs changes", flatTree{"a": e(1)}, flatTree{}, flatTree{"a": e(3)}, nil, []string{"a"}, nil},
		{"both change the summary", flatTree{".gsv/summary.md": e(1)}, flatTree{".gsv/summary.md": e(2)}, flatTree{".gsv/summary.md": e(3)}, nil, nil, flatTree{".gsv/summary.md": e(2)}},
		{"file over a directory", flatTree{}, flatTree{"d/x": e(1)}, flatTree{"d": e(2)}, nil, []string{"d"}, nil},
	} {
		merged, taken, conflicts := merge3(tc.base, tc.ours, tc.theirs)
		if !reflect.DeepEqual(taken, tc.taken) && !(len(conflicts) > 0 && len(tc.conflicts) > 0) {
			t.Errorf("%s: taken %v, want %v", tc.name, taken, tc.taken)
		}
		if !reflect.DeepEqual(conflicts, tc.conflicts) {
			t.Errorf("%s: conflicts %v, want %v", tc.name, conflicts, tc.conflicts)
		}
		if tc.merged != nil && !reflect.DeepEqual(merged, tc.merged) {
			t.Errorf("%s: merged %v, want %v", tc.name, merged, tc.merged)
		}
	}
}
