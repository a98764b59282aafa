package mcpserve

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
)

// Resource subscriptions (resources/subscribe): a client subscribed to
// gsv://proc/<pid>/history or status is sent notifications/resources/updated
// for it at each signal of the process (its /proc/<pid>/events, read as
// the caller), but the text deltas of a run (proc.run.stream), which
// change neither. One stream is followed per process however many of its
// resources are subscribed; the last unsubscribe (or the stream's end:
// the process gone, the daemon gone) ends it.

// Watcher is a Caller that can follow a process's signals: the server
// answers resources/subscribe only with one.
type Watcher interface {
	// Events opens process pid's signal stream as the caller (the
	// kernel's check of a read of /proc/<pid>/events): one JSON line per
	// signal, from now. Closing it ends a read waiting on it.
	Events(ctx context.Context, pid string) (io.ReadCloser, error)
}

// subscriptions are the processes followed for a server's subscribers.
type subscriptions struct {
	w   Watcher
	c   Caller
	log *slog.Logger
	srv *mcp.Server // set once the server is made

	mu    sync.Mutex
	procs map[string]*followed // by pid
}

// followed is one process followed: its stream and the URIs subscribed
// to, each with the sessions subscribed.
type followed struct {
	events io.ReadCloser
	uris   map[string]map[*mcp.ServerSession]bool
}

// subscribe is the SDK's SubscribeHandler: the URI must be a process's
// resource the caller may read (proc.status as the caller), and its
// process's stream is followed.
func (s *subscriptions) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	pid, _, ok := procURI(uri)
	if !ok {
		return mcp.ResourceNotFoundError(uri)
	}
	args, err := json.Marshal(abi.PidArgs{Pid: pid})
	if err != nil {
		return err
	}
	if _, err := s.c.Call(ctx, abi.ProcStatus.Name, args); err != nil {
		return protocolError(err)
	}
	s.mu.Lock()
	f := s.procs[pid]
	s.mu.Unlock()
	if f == nil {
		events, err := s.w.Events(ctx, pid)
		if err != nil {
			return protocolError(err)
		}
		s.mu.Lock()
		if f = s.procs[pid]; f == nil {
			f = &followed{events: events, uris: map[string]map[*mcp.ServerSession]bool{}}
			s.procs[pid] = f
			go s.follow(pid, f)
		} else {
			events.Close() // another subscribe opened it meanwhile
		}
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.uris[uri] == nil {
		f.uris[uri] = map[*mcp.ServerSession]bool{}
	}
	f.uris[uri][req.Session] = true
	return nil
}

// unsubscribe is the SDK's UnsubscribeHandler: the session's
// subscription goes, and the process's stream with its last one.
func (s *subscriptions) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	pid, _, ok := procURI(uri)
	if !ok {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.procs[pid]
	if f == nil {
		return nil
	}
	delete(f.uris[uri], req.Session)
	if len(f.uris[uri]) == 0 {
		delete(f.uris, uri)
	}
	if len(f.uris) == 0 {
		delete(s.procs, pid)
		f.events.Close()
	}
	return nil
}

// follow reads process pid's signals until its stream ends, and tells
// its resources' subscribers of each one that changes them.
func (s *subscriptions) follow(pid string, f *followed) {
	defer func() {
		s.mu.Lock()
		if s.procs[pid] == f {
			delete(s.procs, pid)
		}
		s.mu.Unlock()
		f.events.Close()
	}()
	sc := bufio.NewScanner(f.events)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var sig struct {
			Signal string `json:"signal"`
		}
		if json.Unmarshal(sc.Bytes(), &sig) != nil || sig.Signal == abi.SigProcRunStream.Name {
			continue
		}
		s.mu.Lock()
		uris := make([]string, 0, len(f.uris))
		for u := range f.uris {
			uris = append(uris, u)
		}
		s.mu.Unlock()
		for _, u := range uris {
			if err := s.srv.ResourceUpdated(context.Background(), &mcp.ResourceUpdatedNotificationParams{URI: u}); err != nil {
				s.log.Debug("mcp: notifying a resource's update", "uri", u, "err", err)
			}
		}
	}
}
