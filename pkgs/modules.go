package pkgs

import (
	"context"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// modules serves pkg.modules: the CodeMode modules of the active
// packages the caller sees, their sources read from each package's
// commit as its owner. A module name two packages have is the first's
// (the caller's own packages come before the global ones).
func (r *Room) modules(ctx context.Context, c *kernel.Caller, _ *struct{}) ([]abi.PkgModuleSource, error) {
	recs, err := r.activeFor(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []abi.PkgModuleSource
	seen := map[string]bool{}
	for _, rec := range recs {
		if len(rec.manifest.Modules) == 0 {
			continue
		}
		owner, err := r.ownerCaller(ctx, rec.uid)
		if err != nil {
			return nil, err
		}
		for _, mod := range rec.manifest.Modules {
			if seen[mod.Name] {
				continue
			}
			seen[mod.Name] = true
			b, err := kernel.Do(ctx, r.k, owner, abi.RepoBlob, &abi.RepoBlobArgs{Repo: rec.repo, Ref: rec.commit, Path: inPkg(rec.subdir, mod.Path)})
			if err != nil {
				return nil, abi.E(abi.Path(rec.id), err)
			}
			out = append(out, abi.PkgModuleSource{Package: rec.id, Name: mod.Name, Source: string(b)})
		}
	}
	return out, nil
}
