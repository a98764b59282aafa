package devices

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/abi"
)

// A piped exec on a remote device (process.exec.pipe in a session of
// the device): the command runs in the device's session, as the
// device's user, and its stdin and stdout cross the device's connection
// on one fid of the device's pipe file (devices/export's pipe.go): the
// kernel writes the request frame and reads the start's answer, then
// writes stdin and reads stdout there; clunking the fid stops the
// command. The end of the connection ends the pipe at once: its reads
// fail (every request the connection left unanswered is answered with an
// error, deviceConn), its stdout ends, and its receipt says the device
// went away.

// pipeReceiptWait bounds the wait for a piped command's receipt once its
// stdout ended (process.session.wait on the device).
const pipeReceiptWait = 10 * time.Second

// remotePipe is a piped exec on a remote device (abi.ExecPipe).
type remotePipe struct {
	d   *remoteDevice
	sid string
	fid *client.Fid

	outR *io.PipeReader
	outW *io.PipeWriter
	inMu sync.Mutex // serialises the writes of stdin

	done     chan struct{} // closed once the command's end is known
	receipt  *abi.ExecResult
	stopOnce sync.Once
}

var _ abi.ExecPipe = (*remotePipe)(nil)

// openPipe starts a's command in its session on the device, within
// timeout and while ctx lasts: a fid of the device's pipe file opened,
// the request written, the start's answer read.
func (d *remoteDevice) openPipe(ctx context.Context, a *abi.ExecArgs, timeout time.Duration) (*remotePipe, error) {
	req, err := abi.EncodeRequest("1", abi.ProcessExecPipe.Name, a)
	if err != nil {
		return nil, abi.E(abi.Op(abi.ProcessExecPipe.Name), err)
	}
	type opened struct {
		fid *client.Fid
		err error
	}
	got := make(chan opened, 1)
	go func() {
		fid, err := d.fsys.Open("pipe", plan9.ORDWR)
		if err != nil {
			got <- opened{err: err}
			return
		}
		if err := d.startPipe(fid, req); err != nil {
			fid.Close()
			got <- opened{err: err}
			return
		}
		got <- opened{fid: fid}
	}()
	// A start the caller gave up on is stopped when it comes.
	abandon := func() {
		go func() {
			if o := <-got; o.fid != nil {
				o.fid.Close()
			}
		}()
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var o opened
	select {
	case o = <-got:
	case <-d.done:
		abandon()
		return nil, d.errGone()
	case <-t.C:
		abandon()
		return nil, d.timedOut(abi.ProcessExecPipe.Name, timeout)
	case <-ctx.Done():
		abandon()
		return nil, ctx.Err()
	}
	if o.err != nil {
		return nil, o.err
	}
	p := &remotePipe{d: d, sid: a.SessionID, fid: o.fid, done: make(chan struct{})}
	p.outR, p.outW = io.Pipe()
	go p.pump()
	return p, nil
}

// startPipe writes the request on fid and reads the start's answer: nil
// when the command runs, else its error.
func (d *remoteDevice) startPipe(fid *client.Fid, req []byte) error {
	if !bytes.HasSuffix(req, []byte{'\n'}) {
		req = append(req, '\n')
	}
	if _, err := fid.Write(req); err != nil {
		return d.answerErr(abi.ProcessExecPipe.Name, err)
	}
	var line []byte
	buf := make([]byte, 8192)
	for !bytes.Contains(line, []byte{'\n'}) {
		n, err := fid.Read(buf)
		if err != nil || n == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return d.answerErr(abi.ProcessExecPipe.Name, err)
		}
		if line = append(line, buf[:n]...); len(line) > maxErrorText+4096 {
			return d.answerErr(abi.ProcessExecPipe.Name, errAnswerTooLarge{})
		}
	}
	var ok struct{}
	resp, err := abi.DecodeResponse(line, &ok)
	if err != nil {
		return d.answerErr(abi.ProcessExecPipe.Name, decodeError{err})
	}
	return d.result(abi.ProcessExecPipe.Name, resp, nil)
}

// pump copies the command's stdout from the device to the pipe's reader
// until it ends (the command's end, the pipe's Stop, the connection's
// end), then learns how the command ended.
func (p *remotePipe) pump() {
	buf := make([]byte, 64<<10)
	var err error
	for {
		var n int
		n, err = p.fid.Read(buf)
		if n > 0 {
			if _, werr := p.outW.Write(buf[:n]); werr != nil {
				err = werr
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.receipt = p.ending()
	close(p.done)
	p.stop()
	p.outW.Close()
}

// ending is the command's receipt: the session's last exec on the device
// (process.session.wait), or the device's departure.
func (p *remotePipe) ending() *abi.ExecResult {
	now := time.Now().UnixNano()
	gone := &abi.ExecResult{Status: abi.ExecError, ErrorCode: "device_disconnected", EndedAtNs: now,
		Error: fmt.Sprintf("Device disconnected: device %q went away while the command ran", p.d.id)}
	if !p.d.alive() {
		return gone
	}
	var r abi.ExecResult
	if err := p.d.call(context.Background(), abi.ProcessSessionWait.Name, &abi.SessionGetArgs{SessionID: p.sid}, &r, pipeReceiptWait); err != nil {
		if !p.d.alive() {
			return gone
		}
		return &abi.ExecResult{Status: abi.ExecError, ErrorCode: "no_receipt", EndedAtNs: now, Error: "its receipt could not be had: " + err.Error()}
	}
	markBlobs(&r, p.d.id)
	return &r
}

// Stdin implements abi.ExecPipe: writes cross to the command's stdin;
// Close closes it (a write of no bytes).
func (p *remotePipe) Stdin() io.WriteCloser { return pipeStdin{p} }

// Stdout implements abi.ExecPipe.
func (p *remotePipe) Stdout() io.ReadCloser { return p.outR }

// Done implements abi.ExecPipe.
func (p *remotePipe) Done() <-chan struct{} { return p.done }

// Receipt implements abi.ExecPipe.
func (p *remotePipe) Receipt() *abi.ExecResult {
	select {
	case <-p.done:
		return p.receipt
	default:
		return nil
	}
}

// Stop implements abi.ExecPipe: the fid is clunked, which stops the
// command on the device. It returns at once.
func (p *remotePipe) Stop() { go p.stop() }

// stop clunks the pipe's fid once.
func (p *remotePipe) stop() {
	p.stopOnce.Do(func() { p.fid.Close() })
}

// pipeStdin is a remote pipe's stdin.
type pipeStdin struct{ p *remotePipe }

func (w pipeStdin) Write(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	w.p.inMu.Lock()
	defer w.p.inMu.Unlock()
	return w.p.fid.Write(b)
}

func (w pipeStdin) Close() error {
	w.p.inMu.Lock()
	defer w.p.inMu.Unlock()
	select {
	case <-w.p.done:
		return nil
	default:
	}
	_, err := w.p.fid.Write(nil)
	return err
}
