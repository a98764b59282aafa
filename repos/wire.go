package repos

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp/capability"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/server"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// git's smart protocol (version 0, stateless as over HTTP), as the
// Internal repo.upload (fetch, clone: read) and repo.receive (push:
// write). go-git's server makes the packs a fetch gets; a push's commands
// are checked here, all before any is applied: each ref a branch or tag
// name git accepts, each old value the ref's head now (its expected
// head). A stale one fails the whole push, and no ref moves.

// storeLoader is a server.Loader of one repository's store.
type storeLoader struct{ s storer.Storer }

// Load returns the store, whatever the endpoint.
func (l storeLoader) Load(*transport.Endpoint) (storer.Storer, error) { return l.s, nil }

// advertise writes the refs advertisement of service to w, as smart HTTP
// does: the service line, a flush, then the refs.
func advertise(g *git.Repository, ar *packp.AdvRefs, service string, w io.Writer) error {
	// go-git's server names HEAD's target in a symref capability already
	// (git's remote helper spins on a capability list that names it twice).
	ar.Prefix = [][]byte{[]byte("# service=" + service), pktline.Flush}
	return ar.Encode(w)
}

// upload serves repo.upload: the advertisement, or a fetch's pack, of a
// repository c may read.
func (r *Room) upload(ctx context.Context, c *kernel.Caller, a *abi.RepoWireArgs) (struct{}, error) {
	rec, err := r.access(ctx, c, a.Repo, false)
	if err != nil {
		return struct{}{}, err
	}
	g, err := r.open(rec)
	if err != nil {
		return struct{}{}, err
	}
	sess, err := server.NewServer(storeLoader{g.Storer}).NewUploadPackSession(&transport.Endpoint{}, nil)
	if err != nil {
		return struct{}{}, err
	}
	defer sess.Close()
	if a.Advertise {
		ar, err := sess.AdvertisedReferencesContext(ctx)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, advertise(g, ar, "git-upload-pack", a.Out)
	}
	req := packp.NewUploadPackRequest()
	if err := req.Decode(a.In); err != nil {
		return struct{}{}, abi.E(abi.Invalid, "upload-pack request: "+err.Error())
	}
	// The client asks only for what the advertisement offered; a symref
	// it echoes is not an upload capability.
	req.Capabilities.Delete(capability.SymRef)
	resp, err := sess.UploadPack(ctx, req)
	if err != nil {
		return struct{}{}, abi.E(abi.Invalid, "upload-pack: "+err.Error())
	}
	defer resp.Close()
	return struct{}{}, resp.Encode(a.Out)
}

// receive serves repo.receive: the advertisement, or a push, of a
// repository c may write. Every command is checked before the pack is
// read; the refs then move one by one, each only from the head the
// command expects.
func (r *Room) receive(ctx context.Context, c *kernel.Caller, a *abi.RepoWireArgs) (struct{}, error) {
	rec, err := r.access(ctx, c, a.Repo, true)
	if err != nil {
		return struct{}{}, err
	}
	g, err := r.open(rec)
	if err != nil {
		return struct{}{}, err
	}
	if a.Advertise {
		sess, err := server.NewServer(storeLoader{g.Storer}).NewReceivePackSession(&transport.Endpoint{}, nil)
		if err != nil {
			return struct{}{}, err
		}
		defer sess.Close()
		ar, err := sess.AdvertisedReferencesContext(ctx)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, advertise(g, ar, "git-receive-pack", a.Out)
	}
	req := packp.NewReferenceUpdateRequest()
	if err := req.Decode(io.NopCloser(a.In)); err != nil {
		return struct{}{}, abi.E(abi.Invalid, "receive-pack request: "+err.Error())
	}
	unlock := r.lock(rec)
	defer unlock()
	st := packp.NewReportStatus()
	st.UnpackStatus = "ok"
	// Check every command first: a bad or stale one fails them all.
	var refused error
	for _, cmd := range req.Commands {
		if err := checkCommand(g, cmd); err != nil && refused == nil {
			refused = err
		}
	}
	report := func(why func(*packp.Command) string) {
		for _, cmd := range req.Commands {
			st.CommandStatuses = append(st.CommandStatuses, &packp.CommandStatus{ReferenceName: cmd.Name, Status: why(cmd)})
		}
	}
	if refused != nil {
		report(func(cmd *packp.Command) string {
			if err := checkCommand(g, cmd); err != nil {
				return err.Error()
			}
			return "atomic push failed"
		})
		return struct{}{}, r.writeStatus(req, st, a.Out)
	}
	if req.Packfile != nil {
		if err := packfile.UpdateObjectStorage(g.Storer, req.Packfile); err != nil && err != packfile.ErrEmptyPackfile {
			st.UnpackStatus = "unpack failed: " + err.Error()
			report(func(*packp.Command) string { return "unpacker error" })
			return struct{}{}, r.writeStatus(req, st, a.Out)
		}
	}
	moved := false
	report(func(cmd *packp.Command) string {
		if err := r.applyCommand(g, cmd); err != nil {
			return err.Error()
		}
		moved = true
		return "ok"
	})
	if moved {
		r.touch(ctx, rec)
	}
	return struct{}{}, r.writeStatus(req, st, a.Out)
}

// writeStatus writes a push's report if the client asked for one.
func (r *Room) writeStatus(req *packp.ReferenceUpdateRequest, st *packp.ReportStatus, w io.Writer) error {
	if !req.Capabilities.Supports(capability.ReportStatus) {
		return nil
	}
	return st.Encode(w)
}

// checkCommand checks one push command: the ref a branch or tag, its old
// value the ref's head now (none for a new ref).
func checkCommand(g *git.Repository, cmd *packp.Command) error {
	n := cmd.Name.String()
	if !validRefName(n) || !strings.HasPrefix(n, "refs/heads/") && !strings.HasPrefix(n, "refs/tags/") {
		return fmt.Errorf("funny refname")
	}
	cur := plumbing.ZeroHash
	if ref, err := g.Reference(cmd.Name, false); err == nil {
		cur = ref.Hash()
	}
	if cur != cmd.Old {
		return fmt.Errorf("stale info: the ref is at %s", orNone(parentHex(cur)))
	}
	return nil
}

// applyCommand moves one ref as a checked command says, from its old
// value only, once its new commit is in the store.
func (r *Room) applyCommand(g *git.Repository, cmd *packp.Command) error {
	var old *plumbing.Reference
	if !cmd.Old.IsZero() {
		old = plumbing.NewHashReference(cmd.Name, cmd.Old)
	}
	if cmd.New.IsZero() {
		if err := checkCommand(g, cmd); err != nil {
			return err
		}
		return g.Storer.RemoveReference(cmd.Name)
	}
	if _, err := g.Storer.EncodedObject(plumbing.AnyObject, cmd.New); err != nil {
		return fmt.Errorf("missing object %s", cmd.New)
	}
	if err := g.Storer.CheckAndSetReference(plumbing.NewHashReference(cmd.Name, cmd.New), old); err != nil {
		return fmt.Errorf("stale info")
	}
	return nil
}
