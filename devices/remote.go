package devices

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/ns"
	"gsvfs.dev/gsvfs/vfs"
)

// Remote devices: a device daemon dials the kernel, says its hello, and
// then serves its own 9P tree on the connection (abi.DeviceHello): fs/,
// its exported files, and call, where it answers the routed syscalls as
// request frames. The kernel is the 9P client: a remoteDevice is one
// live connection, and the router's Device for its id while it lasts.

// Defaults of remote devices.
const (
	// DefaultRouteTimeout is how long a routed fs.* call may take before
	// its caller gets 504; shell.exec takes min(11 min, its timeout+10 s).
	DefaultRouteTimeout = 2 * time.Minute
	// pingEvery is how often the kernel checks a quiet device, and
	// pingTimeout how long the device has to answer.
	pingEvery   = 15 * time.Second
	pingTimeout = 10 * time.Second
	// maxHello bounds a hello line (its reader's buffer).
	maxHello = 4096
)

// routable are the syscalls a device may implement.
var routable = append(slices.Clone(Routable), abi.SessionCalls...)

// remoteDevice is one live connection of a device.
type remoteDevice struct {
	id         string
	connID     string
	owner      uint32
	implements []string
	nc         net.Conn
	fsys       *client.Fsys
	tree       vfs.Dir // fs/ of the device's tree, on this connection
	timeout    time.Duration
	log        *slog.Logger
	slots      chan struct{} // its owner's answerSlots
	hold       *hold         // the device's hold (answers.go), kept across its connections
	ch         *channel      // the call channel; nil for a device without an rpc file

	closeOnce sync.Once
	done      chan struct{} // closed when the connection ends
	why       error         // why it ended, set before done closes
}

var _ Device = (*remoteDevice)(nil)

// close ends the connection for why; the first reason counts.
func (d *remoteDevice) close(why error) {
	d.closeOnce.Do(func() {
		d.why = why
		close(d.done)
		d.nc.Close()
	})
}

// errGone is a call's error on a connection that has ended.
func (d *remoteDevice) errGone() error {
	return abi.E(abi.Path(d.id), abi.Offline, fmt.Sprintf("no active connection for device %q: %v", d.id, d.why))
}

// call makes the routed syscall name with args on the device and decodes
// its result into res: on the connection's call channel (channel.go), or,
// for a device whose tree has no rpc file (a device daemon from before
// it), as a request written to a fid of its call file opened for the
// call (callFile). It fails at once when the connection ends, with 504
// when timeout passes, and with ctx's error when the caller goes (the
// request is cancelled on the device).
func (d *remoteDevice) call(ctx context.Context, name string, args, res any, timeout time.Duration) error {
	select {
	case <-d.done:
		return d.errGone()
	default:
	}
	if err := d.hold.check(d.id, name); err != nil {
		return err
	}
	if d.ch != nil {
		return d.ch.call(ctx, name, args, res, timeout)
	}
	return d.callFile(ctx, name, args, res, timeout)
}

// timedOut is the error of a call that outlasted its deadline.
func (d *remoteDevice) timedOut(name string, timeout time.Duration) error {
	return abi.E(abi.Path(d.id), abi.Timeout, fmt.Sprintf("Syscall timed out: device %q did not answer %s within %s", d.id, name, timeout))
}

// answerErr is the error of a call whose answer could not be had: one
// over MaxAnswer, one that does not decode, a failed exchange (the
// connection's end if it has ended); an *abi.Error is already the call's.
func (d *remoteDevice) answerErr(name string, err error) error {
	var big errAnswerTooLarge
	if errors.As(err, &big) {
		d.hold.strike()
		return abi.E(abi.Path(d.id), abi.Other, fmt.Sprintf("device %q answered %s with more than %d bytes: refused", d.id, name, MaxAnswer))
	}
	var de decodeError
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	if errors.As(err, &de) || errors.As(err, &se) || errors.As(err, &te) || errors.Is(err, io.ErrUnexpectedEOF) && d.alive() {
		return abi.E(abi.Path(d.id), abi.Other, fmt.Sprintf("the device's answer to %s does not decode: %v", name, err))
	}
	var ae *abi.Error
	if errors.As(err, &ae) {
		return err
	}
	return d.transportErr(err)
}

// result is the outcome of a call the device answered with resp, whose
// data was decoded into res: the device's error, or res once checked
// (checkAnswer).
func (d *remoteDevice) result(name string, resp abi.Response, res any) error {
	if !resp.OK {
		if resp.Error == nil {
			return abi.E(abi.Path(d.id), abi.Other, "the device answered neither a result nor an error")
		}
		msg := strings.TrimPrefix(oneLine(resp.Error.Message, maxErrorText), name+": ")
		return abi.E(answerKind(resp.Error.Code), msg)
	}
	if err := checkAnswer(res); err != nil {
		return abi.E(abi.Path(d.id), abi.Other, fmt.Sprintf("device %q answered %s with %v: refused", d.id, name, err))
	}
	return nil
}

// callFile makes a call as a device daemon without an rpc file takes it:
// the request written to a fid of the call file opened for it, its
// answer read from that fid, the fid clunked (which cancels the request
// there if it is still running).
func (d *remoteDevice) callFile(ctx context.Context, name string, args, res any, timeout time.Duration) error {
	req, err := abi.EncodeRequest("1", name, args)
	if err != nil {
		return abi.E(abi.Op(name), err)
	}
	type answer struct {
		resp abi.Response
		err  error
	}
	got := make(chan answer, 1)
	stop := make(chan struct{}) // closed when the caller gives up
	var (
		mu        sync.Mutex
		fid       *client.Fid
		abandoned bool
	)
	// closeFid closes the call's fid once; abandon closes it and marks the
	// call abandoned, so that a fid opened after the caller gave up is
	// closed at once (which cancels the request on the device).
	closeFid := func() {
		mu.Lock()
		defer mu.Unlock()
		if fid != nil {
			fid.Close()
			fid = nil
		}
	}
	abandon := func() {
		mu.Lock()
		abandoned = true
		mu.Unlock()
		close(stop)
		closeFid()
	}
	go func() {
		// The whole exchange runs here, so that a device that stops
		// answering (at the open as well as the read) costs its caller
		// no more than the deadline.
		f, err := d.fsys.Open("call", plan9.ORDWR)
		if err != nil {
			got <- answer{err: err}
			return
		}
		mu.Lock()
		fid = f
		gone := abandoned
		mu.Unlock()
		defer closeFid()
		if gone {
			return
		}
		if _, err := f.Write(req); err != nil {
			got <- answer{err: err}
			return
		}
		resp, err := readAnswer(fidReader{f}, d.slots, stop, res)
		got <- answer{resp, err}
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case a := <-got:
		if a.err != nil {
			return d.answerErr(name, a.err)
		}
		return d.result(name, a.resp, res)
	case <-ctx.Done():
		abandon()
		return ctx.Err()
	case <-timer.C:
		abandon()
		return d.timedOut(name, timeout)
	case <-d.done:
		abandon()
		return d.errGone()
	}
}

// alive reports whether d's connection has not ended.
func (d *remoteDevice) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// transportErr is the error of a call whose 9P exchange failed: the
// connection's end if it has ended, else a 503 naming the failure.
func (d *remoteDevice) transportErr(err error) error {
	select {
	case <-d.done:
		return d.errGone()
	default:
	}
	return abi.E(abi.Path(d.id), abi.Offline, fmt.Sprintf("device %q: %v", d.id, err))
}

// fidReader reads a fid from its current offset.
type fidReader struct{ f *client.Fid }

func (r fidReader) Read(p []byte) (int, error) {
	n, err := r.f.Read(p)
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return n, err
}

// routed makes the routed call name with args (its target already
// stripped) on d within timeout, and returns its result.
func routed[R any](ctx context.Context, d *remoteDevice, name string, args any, timeout time.Duration) (*R, error) {
	var r R
	if err := d.call(ctx, name, args, &r, timeout); err != nil {
		return nil, err
	}
	return &r, nil
}

// Read is fs.read on the device.
func (d *remoteDevice) Read(ctx context.Context, _ local.Who, a *abi.FSReadArgs) (*abi.FSReadResult, error) {
	b := *a
	b.Target = ""
	return routed[abi.FSReadResult](ctx, d, abi.FsRead.Name, &b, d.timeout)
}

// Write is fs.write on the device.
func (d *remoteDevice) Write(ctx context.Context, _ local.Who, a *abi.FSWriteArgs) (*abi.FSWriteResult, error) {
	b := *a
	b.Target = ""
	return routed[abi.FSWriteResult](ctx, d, abi.FsWrite.Name, &b, d.timeout)
}

// Edit is fs.edit on the device.
func (d *remoteDevice) Edit(ctx context.Context, _ local.Who, a *abi.FSEditArgs) (*abi.FSEditResult, error) {
	b := *a
	b.Target = ""
	return routed[abi.FSEditResult](ctx, d, abi.FsEdit.Name, &b, d.timeout)
}

// Delete is fs.delete on the device.
func (d *remoteDevice) Delete(ctx context.Context, _ local.Who, a *abi.FSDeleteArgs) (*abi.FSDeleteResult, error) {
	b := *a
	b.Target = ""
	return routed[abi.FSDeleteResult](ctx, d, abi.FsDelete.Name, &b, d.timeout)
}

// Search is fs.search on the device: it runs there.
func (d *remoteDevice) Search(ctx context.Context, _ local.Who, a *abi.FSSearchArgs) (*abi.FSSearchResult, error) {
	b := *a
	b.Target = ""
	return routed[abi.FSSearchResult](ctx, d, abi.FsSearch.Name, &b, d.timeout)
}

// Exec is shell.exec on the device, with the deadline min(11 min, the
// command's timeout + 10 s).
func (d *remoteDevice) Exec(ctx context.Context, _ local.Who, a *abi.ShellExecArgs) (*abi.ShellExecResult, error) {
	b := *a
	b.Target = ""
	timeout := 2 * time.Minute
	if a.TimeoutMs > 0 {
		timeout = time.Duration(a.TimeoutMs) * time.Millisecond
	}
	deadline := min(11*time.Minute, timeout+10*time.Second)
	if a.SessionID != "" {
		deadline = min(deadline, d.timeout+10*time.Second)
	}
	return routed[abi.ShellExecResult](ctx, d, abi.ShellExec.Name, &b, deadline)
}

// randomID is a random name for a connection.
func randomID() string {
	b := make([]byte, 10)
	rand.Read(b)
	return strings.ToLower(strings.TrimRight(base32.StdEncoding.EncodeToString(b), "="))
}

// ServeDevice serves one device connection that begins with
// abi.DeviceMagic: it reads the hello (within helloTimeout), checks the
// node token against the id it names (kernel.AuthenticateNode), registers
// the device and answers a welcome; then it is the 9P client of the
// device's tree until the connection ends, the token is revoked, the
// device stops answering pings, a newer connection of the same id
// supersedes it, ctx ends or the router closes. A refused hello is
// answered with its error and the connection closed.
func (r *Router) ServeDevice(ctx context.Context, c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(helloTimeout))
	br := bufio.NewReaderSize(c, maxHello)
	h, err := readHello(br)
	if err != nil {
		r.log.Debug("device hello refused", "remote", c.RemoteAddr().String(), "err", err)
		writeWelcome(c, abi.DeviceWelcome{Error: err.Error()})
		return
	}
	id, err := r.k.AuthenticateNode(ctx, h.Token, h.ID)
	if err != nil {
		r.log.Info("device refused", "device", h.ID, "remote", c.RemoteAddr().String(), "err", err)
		writeWelcome(c, abi.DeviceWelcome{Error: err.Error()})
		return
	}
	// Authenticated: the connection leaves the gate of unauthenticated
	// ones; one per device id lasts (a newer one supersedes it), and a
	// user has at most maxDevices ids.
	ninep.TicketOf(c).Authenticated()
	connID := "dc_" + randomID()
	if err := r.Register(ctx, id.Uid, h, connID); err != nil {
		writeWelcome(c, abi.DeviceWelcome{Error: err.Error()})
		return
	}
	if err := writeWelcome(c, abi.DeviceWelcome{OK: true, ConnectionID: connID}); err != nil {
		r.Disconnected(context.Background(), h.ID, connID)
		return
	}
	if br.Buffered() > 0 {
		r.Disconnected(context.Background(), h.ID, connID)
		return // a device speaks no more until the kernel asks
	}
	c.SetDeadline(time.Now().Add(helloTimeout))
	// The 9P client reads the connection all the time: its end (the
	// device died, the network went) ends the device at once, and fails
	// every request it left unanswered.
	d := &remoteDevice{id: h.ID, connID: connID, owner: id.Uid, implements: h.Implements, nc: c,
		timeout: r.routeTimeout, log: r.log, done: make(chan struct{})}
	lost := make(chan error, 1)
	dc := newDeviceConn(c, func(err error) { lost <- err })
	defer func() {
		c.Close()
		dc.wait()
	}()
	cc, err := client.NewConn(dc)
	if err == nil {
		d.fsys, err = cc.Attach(nil, "kernel", "")
	}
	if err == nil {
		// The call channel: the rpc file, opened once (nothing else
		// uses the connection yet: the fid the client opened it on is
		// the last it opened). A device daemon from before it has only
		// the call file.
		var f *client.Fid
		f, err = d.fsys.Open("rpc", plan9.ORDWR)
		var rerr client.Error
		switch {
		case err == nil:
			d.ch = openChannel(d, dc, f, dc.lastOpened())
		case errors.As(err, &rerr):
			r.log.Info("device has no rpc file: its calls open its call file each", "device", h.ID, "version", h.Version)
			err = nil
		}
	}
	c.SetDeadline(time.Time{})
	if err != nil {
		r.log.Info("device tree refused", "device", h.ID, "err", err)
		d.close(err)
		if d.ch != nil {
			d.ch.wait()
		}
		r.Disconnected(context.Background(), h.ID, connID)
		return
	}
	d.slots = r.answerSlots(id.Uid)
	d.hold = r.holdOf(d.id)
	d.tree = ninep.RemoteDir(d.fsys, "fs", ninep.RemoteOptions{Owner: r.ownerShown(ctx, id.Uid), Lost: d.done, OneLineNames: true})
	r.attach(d)
	r.log.Info("device connected", "device", d.id, "owner", d.owner, "platform", h.Platform, "version", h.Version, "implements", h.Implements)
	go func() { // the connection's end, whoever sees it
		select {
		case err := <-lost:
			d.close(fmt.Errorf("the connection was lost: %v", err))
		case <-hangup(c, d.done):
			d.close(errors.New("the device hung up"))
		case <-id.Done():
			d.close(errors.New("its token was revoked or expired"))
		case <-ctx.Done():
			d.close(errors.New("the kernel is stopping"))
		case <-r.closing:
			d.close(errors.New("the kernel is stopping"))
		case <-d.done:
		}
	}()
	r.ping(d)
	r.detach(d)
	r.log.Info("device disconnected", "device", d.id, "why", d.why)
}

// ownerShown is how the files of a device of uid show their owner.
func (r *Router) ownerShown(ctx context.Context, uid uint32) *ninep.RemoteOwner {
	m := ns.UserMeta(ctx, r.k, uid, fmt.Sprint(uid))
	return &ninep.RemoteOwner{Uid: uint32(m.HostUID), Gid: m.Gid, User: m.Owner, Group: m.Group}
}

// readHello reads the magic line and the hello.
func readHello(br *bufio.Reader) (abi.DeviceHello, error) {
	var h abi.DeviceHello
	magic := make([]byte, len(abi.DeviceMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != abi.DeviceMagic {
		return h, abi.E(abi.Op("device.hello"), abi.Invalid, "not a device: want "+strings.TrimSpace(abi.DeviceMagic))
	}
	line, err := br.ReadSlice('\n')
	if err != nil {
		return h, abi.E(abi.Op("device.hello"), abi.Invalid, fmt.Sprintf("no hello line within %d bytes: %v", maxHello, err))
	}
	dec := json.NewDecoder(strings.NewReader(string(line)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return h, abi.E(abi.Op("device.hello"), abi.Invalid, fmt.Sprintf("malformed hello: %v", err))
	}
	if err := checkHello(h); err != nil {
		return h, abi.E(abi.Op("device.hello"), err)
	}
	for _, s := range h.Implements {
		if !slices.Contains(routable, s) {
			return h, abi.E(abi.Op("device.hello"), abi.Invalid, fmt.Sprintf("implements %q: a device serves only %s", s, strings.Join(routable, ", ")))
		}
	}
	return h, nil
}

// writeWelcome writes w as one JSON line.
func writeWelcome(c net.Conn, w abi.DeviceWelcome) error {
	b, err := json.Marshal(w)
	if err != nil {
		return err
	}
	_, err = c.Write(append(b, '\n'))
	return err
}

// ping checks d every pingEvery until its connection ends: a device that
// does not answer a stat of its root within pingTimeout is dropped, so
// that its callers fail instead of waiting.
func (r *Router) ping(d *remoteDevice) {
	tick := time.NewTicker(pingEvery)
	defer tick.Stop()
	for {
		select {
		case <-d.done:
			return
		case <-tick.C:
		}
		answered := make(chan error, 1)
		go func() { _, err := d.fsys.Stat("."); answered <- err }()
		select {
		case err := <-answered:
			// An Rerror is an answer: the device is alive.
			var rerr client.Error
			if err != nil && !errors.As(err, &rerr) {
				d.close(fmt.Errorf("its tree failed: %v", err))
				return
			}
			if err != nil {
				r.log.Debug("device ping answered with an error", "device", d.id, "err", err)
			}
			r.Seen(context.Background(), d.id)
		case <-time.After(pingTimeout):
			d.close(fmt.Errorf("it did not answer for %s", pingTimeout))
			return
		case <-d.done:
			return
		}
	}
}

// attach makes d the live connection of its id, ending the one it
// supersedes.
func (r *Router) attach(d *remoteDevice) {
	r.mu.Lock()
	old := r.remotes[d.id]
	r.remotes[d.id] = d
	r.mu.Unlock()
	if old != nil {
		old.close(errors.New("a newer connection of the device superseded it"))
	}
}

// detach forgets d if it is still its id's live connection and records
// the device offline; the shell jobs and exec sessions it ran fail.
func (r *Router) detach(d *remoteDevice) {
	d.close(errors.New("the connection ended"))
	if d.ch != nil {
		d.ch.wait() // its goroutines end with the connection
	}
	r.mu.Lock()
	current := r.remotes[d.id] == d
	if current {
		delete(r.remotes, d.id)
	}
	for _, routes := range []map[string]shellRoute{r.shellRoutes, r.procRoutes} {
		for sid, sr := range routes {
			if sr.dev == d {
				sr.failed = true
				routes[sid] = sr
			}
		}
	}
	r.mu.Unlock()
	r.failShellJobs(d)
	r.failProcessSessions(d)
	if err := r.Disconnected(context.Background(), d.id, d.connID); err != nil {
		r.log.Warn("device disconnected: recording it", "device", d.id, "err", err)
	}
}

// remote returns id's live connection, or nil.
func (r *Router) remote(id string) *remoteDevice {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.remotes[id]
}
