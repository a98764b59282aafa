package ns

import (
	"context"
	"encoding/json"
	"io/fs"
	"slices"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/abi/schema"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/vfs"
)

// syscallsPath is the directory of the syscalls' descriptions.
const syscallsPath = "/sys/syscalls"

// syscallsDir is /sys/syscalls: a directory per syscall the reader may
// make with a request frame (sys.syscall.list, made as the reader), each
// holding doc (its descriptor's Doc) and schema
// (the JSON Schemas of its args and result, abi/schema). Every listing,
// lookup and read asks the dispatcher again and renders from the
// descriptor: the directory keeps no state, and a syscall the reader may
// not make is not there (404), whoever looked it up before.
func (s *Space) syscallsDir() vfs.Dir {
	return &vfs.FuncDir{Meta: RootMeta(syscallsPath, fs.ModeDir|0o555),
		List: func(ctx context.Context, cred vfs.Cred) ([]vfs.DirEntry, error) {
			ds, err := s.callable(ctx, cred)
			if err != nil {
				return nil, err
			}
			out := make([]vfs.DirEntry, 0, len(ds))
			for _, d := range ds {
				out = append(out, vfs.DirEntry{Name: d.CallName(), Node: s.syscallDir(d.CallName())})
			}
			return out, nil
		},
		Find: func(ctx context.Context, cred vfs.Cred, name string) (vfs.Node, error) {
			if _, err := s.callableDesc(ctx, cred, name); err != nil {
				return nil, err
			}
			return s.syscallDir(name), nil
		}}
}

// callable returns the descriptors of the syscalls cred may make with a
// request frame, sorted by name.
func (s *Space) callable(ctx context.Context, cred vfs.Cred) ([]abi.Desc, error) {
	res, err := kernel.Do(ctx, s.k, CallerOf(cred, ""), abi.SysSyscallList, nil)
	if err != nil {
		return nil, err
	}
	var out []abi.Desc
	for _, d := range s.k.Descs() {
		if _, ok := slices.BinarySearch(res.Syscalls, d.CallName()); ok {
			out = append(out, d)
		}
	}
	return out, nil
}

// callableDesc returns the descriptor of the syscall name if cred may
// make it, else a 404.
func (s *Space) callableDesc(ctx context.Context, cred vfs.Cred, name string) (abi.Desc, error) {
	ds, err := s.callable(ctx, cred)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.CallName() == name {
			return d, nil
		}
	}
	return nil, vfs.ErrNotExist
}

// syscallDir is /sys/syscalls/<name>: its doc and its schema.
func (s *Space) syscallDir(name string) *vfs.StaticDir {
	p := syscallsPath + "/" + name
	view := func(file string, render func(d abi.Desc) ([]byte, error)) vfs.DirEntry {
		return vfs.DirEntry{Name: file, Node: &vfs.View{Meta: RootMeta(p+"/"+file, 0o444),
			Render: func(ctx context.Context, cred vfs.Cred) ([]byte, error) {
				d, err := s.callableDesc(ctx, cred, name)
				if err != nil {
					return nil, err
				}
				return render(d)
			}}}
	}
	return vfs.NewDir(RootMeta(p, fs.ModeDir|0o555),
		view("doc", func(d abi.Desc) ([]byte, error) { return []byte(d.CallDoc() + "\n"), nil }),
		view("schema", func(d abi.Desc) ([]byte, error) {
			sc, err := schema.Of(d)
			if err != nil {
				return nil, abi.E(abi.Path(p+"/schema"), abi.Other, err)
			}
			b, err := json.MarshalIndent(sc, "", "  ")
			return append(b, '\n'), err
		}),
	)
}
