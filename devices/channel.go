package devices

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"9fans.net/go/plan9/client"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/vfs"
)

// The call channel of a device connection: one fid of the device's rpc
// file (a vfs.Mux, devices/export), opened once when the device connects
// and kept for the connection's life. Every routed call of the
// connection is a request frame on it with an id of its own; the device
// runs them concurrently and answers each, in the order they are ready,
// with a response frame carrying its id.
//
//   - A writer goroutine sends the request frames waiting, as many as fit
//     in one Twrite (a frame longer than that alone, in Twrites that
//     follow each other: frames never interleave).
//   - A reader goroutine keeps one Tread waiting on the fid at all times:
//     the device answers it as soon as an answer is ready, so a call costs
//     one round trip (the Twrite's reply and the Tread's cross). It cuts
//     what it reads into answers at their newlines, reads an answer's id
//     (abi.FrameTag) and hands the answer to its caller, who decodes it
//     (abi.DecodeResponse) into the result, once.
//   - A caller that gives up (its ctx ends, its deadline passes) sends a
//     cancel frame naming its request (abi.EncodeCancel): the device
//     cancels that request only, and its answer, when it comes, is
//     dropped. The connection's end fails every caller at once.
//   - What a device answers is bounded as on the call file (answers.go):
//     an answer over abi.MaxAnswer fails its call and ends the
//     connection (the kernel reads no further: the stream cannot be read
//     past an answer without reading it); past answerSlotAfter an answer
//     is read in one of its owner's answer slots. An answer that names no
//     id (not a frame) ends the connection; one whose id the kernel did
//     not send, or whose caller is gone, is dropped.
//   - At most maxChannelCalls calls are in flight at once (the cancelled
//     ones until their answers come): more wait for a place, within their
//     deadlines. That is half the device's bound per handle
//     (vfs.MaxMuxInflight), which counts cancel lines too.

// maxChannelCalls bounds the calls in flight on one channel.
const maxChannelCalls = vfs.MaxMuxInflight / 2

// channelUnit is the most a Tread asks for and a Twrite carries (the
// iounit of the kernel's 9P client: its msize less the message header).
const channelUnit = maxFrame - 24

// channel is one device connection's call channel.
type channel struct {
	d        *remoteDevice
	fid      *client.Fid
	inflight chan struct{} // a token per call in flight
	wake     chan struct{} // (buffered) the writer has frames to send
	ended    chan struct{} // closed when the channel ends
	wg       sync.WaitGroup

	mu      sync.Mutex
	next    uint64
	pending map[string]*chanCall // calls sent and not answered, by id
	queue   []outFrame           // frames waiting for the writer
	err     error                // why the channel ended
}

// outFrame is a frame waiting for the writer: a request, or a cancel.
type outFrame struct {
	id     string
	frame  []byte
	cancel bool
}

// chanCall is one call in flight on a channel.
type chanCall struct {
	id   string
	got  chan chanAnswer // (buffered) the answer, or why there is none
	stop chan struct{}   // closed when the caller gives up
	gone bool            // the caller gave up; guarded by channel.mu
}

// chanAnswer is what a call gets: its answer frame, which holds one of
// its owner's answer slots if held (released once decoded), or err.
type chanAnswer struct {
	frame []byte
	held  bool
	err   error
}

// openChannel makes the call channel of d on fid, an open fid of the
// device's rpc file, and starts its reader and writer.
func openChannel(d *remoteDevice, fid *client.Fid) *channel {
	ch := &channel{d: d, fid: fid, inflight: make(chan struct{}, maxChannelCalls), wake: make(chan struct{}, 1),
		ended: make(chan struct{}), pending: map[string]*chanCall{}}
	ch.wg.Add(2)
	go ch.writer()
	go ch.reader()
	return ch
}

// wait waits for the reader and the writer to end: they end when the
// connection does.
func (ch *channel) wait() { ch.wg.Wait() }

// call makes the routed syscall name with args on the channel and
// decodes its result into res (see remoteDevice.call).
func (ch *channel) call(ctx context.Context, name string, args, res any, timeout time.Duration) error {
	d := ch.d
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case ch.inflight <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return d.timedOut(name, timeout)
	case <-d.done:
		return d.errGone()
	}
	c := &chanCall{got: make(chan chanAnswer, 1), stop: make(chan struct{})}
	ch.mu.Lock()
	if ch.err != nil {
		ch.mu.Unlock()
		<-ch.inflight
		return d.errGone()
	}
	ch.next++
	c.id = strconv.FormatUint(ch.next, 10)
	ch.pending[c.id] = c
	ch.mu.Unlock()
	frame, err := abi.EncodeRequest(c.id, name, args)
	if err == nil && len(frame) > vfs.MaxLine {
		err = abi.E(abi.Path(d.id), abi.Invalid, fmt.Sprintf("the request is %d bytes: a device takes at most %d", len(frame), vfs.MaxLine))
	}
	if err != nil {
		ch.forget(c)
		return abi.E(abi.Op(name), err)
	}
	ch.send(outFrame{id: c.id, frame: frame})
	select {
	case a := <-c.got:
		if a.err != nil {
			return d.answerErr(name, a.err)
		}
		defer ch.release(a)
		resp, err := abi.DecodeResponse(a.frame, res)
		if err == nil && resp.ID != c.id {
			err = fmt.Errorf("it names request %q", oneLine(resp.ID, 64))
		}
		if err != nil {
			return d.answerErr(name, decodeError{err})
		}
		return d.result(name, resp, res)
	case <-ctx.Done():
		ch.abandon(c)
		return ctx.Err()
	case <-timer.C:
		ch.abandon(c)
		return d.timedOut(name, timeout)
	case <-d.done:
		ch.abandon(c)
		return d.errGone()
	}
}

// decodeError is an answer that does not decode.
type decodeError struct{ error }

func (e decodeError) Unwrap() error { return e.error }

// send queues f for the writer.
func (ch *channel) send(f outFrame) {
	ch.mu.Lock()
	ch.queue = append(ch.queue, f)
	ch.mu.Unlock()
	select {
	case ch.wake <- struct{}{}:
	default:
	}
}

// forget drops c, never sent, and gives back its place.
func (ch *channel) forget(c *chanCall) {
	ch.mu.Lock()
	delete(ch.pending, c.id)
	ch.mu.Unlock()
	<-ch.inflight
}

// abandon gives c up: its request is cancelled on the device, and its
// answer is dropped when it comes (its place in flight is given back
// then). An answer that came meanwhile is released.
func (ch *channel) abandon(c *chanCall) {
	ch.mu.Lock()
	if _, ok := ch.pending[c.id]; ok {
		c.gone = true
		close(c.stop)
		ch.mu.Unlock()
		ch.send(outFrame{id: c.id, frame: abi.EncodeCancel(c.id), cancel: true})
		return
	}
	ch.mu.Unlock()
	select {
	case a := <-c.got:
		ch.release(a)
	default:
	}
}

// release gives back the answer slot a holds, if it holds one.
func (ch *channel) release(a chanAnswer) {
	if a.held {
		<-ch.d.slots
	}
}

// end ends the channel for why, once: the connection is closed, and every
// caller waiting fails at once (with the connection's end).
func (ch *channel) end(why error) {
	ch.d.close(why)
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.err != nil {
		return
	}
	ch.err = why
	close(ch.ended)
	for id, c := range ch.pending {
		delete(ch.pending, id)
		if !c.gone {
			c.got <- chanAnswer{err: ch.d.errGone()}
		}
	}
	ch.queue = nil
}

// writer sends the frames queued, as many as fit in one Twrite at a
// time, until the channel ends. A write the device refuses (an Rerror)
// fails the calls it carried; a failed connection ends the channel.
func (ch *channel) writer() {
	defer ch.wg.Done()
	var batch []byte
	var sent []outFrame
	for {
		select {
		case <-ch.wake:
		case <-ch.ended:
			return
		}
		for {
			batch, sent = batch[:0], sent[:0]
			ch.mu.Lock()
			for len(ch.queue) > 0 && (len(batch) == 0 || len(batch)+len(ch.queue[0].frame) <= channelUnit) {
				f := ch.queue[0]
				ch.queue[0] = outFrame{}
				ch.queue = ch.queue[1:]
				batch = append(batch, f.frame...)
				sent = append(sent, f)
			}
			ch.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			if _, err := ch.fid.Write(batch); err != nil {
				if !ch.d.alive() {
					ch.end(fmt.Errorf("its call channel failed: %v", err))
					return
				}
				ch.refused(sent, err)
			}
		}
	}
}

// refused fails the calls whose requests the device refused to take.
func (ch *channel) refused(sent []outFrame, err error) {
	fail := abi.E(abi.Path(ch.d.id), abi.Offline, fmt.Sprintf("device %q refused the request: %s", ch.d.id, errText(err)))
	ch.mu.Lock()
	defer ch.mu.Unlock()
	for _, f := range sent {
		c := ch.pending[f.id]
		if f.cancel || c == nil {
			continue
		}
		delete(ch.pending, f.id)
		<-ch.inflight
		if !c.gone {
			c.got <- chanAnswer{err: fail}
		}
	}
}

// errText is an error of the 9P client as one line.
func errText(err error) string { return oneLine(err.Error(), maxErrorText) }

// reader reads the answers until the channel ends (see channel).
func (ch *channel) reader() {
	defer ch.wg.Done()
	buf := make([]byte, channelUnit)
	var (
		cur     []byte    // the answer being read
		c       *chanCall // whose it is, once looked for (nil: nobody's, or not known)
		looked  bool      // c was looked for
		held    bool      // cur holds one of the owner's answer slots
		discard bool      // the rest of the answer is dropped: its caller is gone
	)
	defer func() {
		if held {
			<-ch.d.slots
		}
	}()
	for {
		n, err := ch.fid.Read(buf)
		if err != nil {
			ch.end(fmt.Errorf("its call channel failed: %v", err))
			return
		}
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			piece := data
			if i >= 0 {
				piece = data[:i]
			}
			if !discard {
				if len(cur)+len(piece) > abi.MaxAnswer {
					ch.tooLarge(append(cur, piece[:min(len(piece), 256)]...))
					return
				}
				if !held && len(cur)+len(piece) > answerSlotAfter {
					if !looked {
						c, looked = ch.whose(append(cur, piece[:min(len(piece), 256)]...)), true
					}
					switch ch.takeSlot(c) {
					case slotTaken:
						held = true
					case slotCallerGone:
						discard, cur = true, nil
					case slotEnded:
						return
					}
				}
				if !discard {
					cur = append(cur, piece...)
				}
			}
			if i < 0 {
				break
			}
			data = data[i+1:]
			if !discard && !ch.deliver(cur, held) {
				held = false
				return
			}
			cur, c, looked, held, discard = nil, nil, false, false, false
		}
	}
}

// whose returns the call the answer beginning with b answers, if its
// beginning names one still waiting.
func (ch *channel) whose(b []byte) *chanCall {
	_, id, err := abi.FrameTag(b)
	if err != nil {
		return nil
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if c := ch.pending[id]; c != nil && !c.gone {
		return c
	}
	return nil
}

// The outcomes of takeSlot.
const (
	slotTaken = iota
	slotCallerGone
	slotEnded
)

// takeSlot waits for one of the owner's answer slots, unless c (nil: an
// answer of a call not known) gives up or the channel ends first.
func (ch *channel) takeSlot(c *chanCall) int {
	var stop chan struct{}
	if c != nil {
		stop = c.stop
	}
	select {
	case ch.d.slots <- struct{}{}:
		return slotTaken
	case <-stop:
		return slotCallerGone
	case <-ch.ended:
		return slotEnded
	}
}

// deliver hands the answer frame to its caller; it reports false when
// the frame names no id, which ends the channel.
func (ch *channel) deliver(frame []byte, held bool) bool {
	a := chanAnswer{frame: frame, held: held}
	_, id, err := abi.FrameTag(frame)
	if err != nil {
		ch.release(a)
		ch.end(fmt.Errorf("it answered a malformed frame: %s", oneLine(err.Error(), 200)))
		return false
	}
	ch.mu.Lock()
	c := ch.pending[id]
	if c == nil {
		ch.mu.Unlock()
		ch.release(a)
		ch.d.log.Debug("device answered a request it was not asked", "device", ch.d.id, "id", oneLine(id, 64))
		return true
	}
	delete(ch.pending, id)
	<-ch.inflight
	if c.gone {
		ch.mu.Unlock()
		ch.release(a)
		return true
	}
	c.got <- a
	ch.mu.Unlock()
	return true
}

// tooLarge fails the call of the answer beginning with b, which runs past
// abi.MaxAnswer, and ends the channel: the kernel reads no more of it.
func (ch *channel) tooLarge(b []byte) {
	if c := ch.whose(b); c != nil {
		ch.mu.Lock()
		if ch.pending[c.id] == c {
			delete(ch.pending, c.id)
			c.got <- chanAnswer{err: errAnswerTooLarge{}}
		}
		ch.mu.Unlock()
	}
	ch.end(errors.New("it answered with more than " + strconv.Itoa(abi.MaxAnswer) + " bytes"))
}
