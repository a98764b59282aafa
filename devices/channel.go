package devices

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"9fans.net/go/plan9"
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
// The channel writes its 9P messages itself, with tags of its own
// (chanTagWrite, chanTagRead), on the fid the kernel's 9P client opened,
// and the connection's reader hands it their replies as it reads them
// (deviceConn): a call costs one write to the socket and one wake-up of
// the reader, with no 9P client between.
//
//   - A writer goroutine sends the request frames waiting, as many as fit
//     in one Twrite, one Twrite at a time (the next when the device has
//     answered the last: the device takes writes in order); a frame
//     longer than a Twrite goes alone, in Twrites that follow each other:
//     frames never interleave. With the Twrite, in the same write to the
//     socket (before it), goes a Tread when calls wait for answers and
//     none is in flight: the device answers it as soon as an answer is
//     ready, so a call costs one round trip.
//   - The connection's reader cuts what a Tread returns into answers at
//     their newlines, reads an answer's id (abi.FrameTag) and hands the
//     answer to its caller, who decodes it (abi.DecodeResponse) into the
//     result, once. While calls still wait, the writer sends the next
//     Tread.
//   - A caller that gives up (its ctx ends, its deadline passes) sends a
//     cancel frame naming its request (abi.EncodeCancel): the device
//     cancels that request only, and its answer, when it comes, is
//     dropped. The connection's end fails every caller at once.
//   - What a device answers is bounded as on the call file (answers.go):
//     an answer over abi.MaxAnswer fails its call and ends the
//     connection (the kernel reads no further: the stream cannot be read
//     past an answer without reading it); past answerSlotAfter an answer
//     is read in one of its owner's answer slots: when none is free, no
//     Tread is sent until one is (a goroutine of the channel waits for it,
//     never the connection's reader). An answer that names no id (not a
//     frame) ends the connection; one whose id the kernel did not send,
//     or whose caller is gone, is dropped. A reply that is not the one
//     its message asks for, an Rread of nothing or an Rerror to a Tread
//     ends the connection; an Rerror to a Twrite fails the calls it
//     carried.
//   - At most maxChannelCalls calls are in flight at once (the cancelled
//     ones until their answers come): more wait for a place, within their
//     deadlines. That is half the device's bound per handle
//     (vfs.MaxMuxInflight), which counts cancel lines too.

// maxChannelCalls bounds the calls in flight on one channel.
const maxChannelCalls = vfs.MaxMuxInflight / 2

// channelUnit is the most a Tread asks for and a Twrite carries (the
// iounit of the kernel's 9P client: its msize less the message header; a
// device may negotiate less).
const channelUnit = maxFrame - plan9.IOHDRSZ

// channel is one device connection's call channel.
type channel struct {
	d        *remoteDevice
	conn     *deviceConn
	file     *client.Fid   // the client's fid of the rpc file, kept open
	fid      uint32        // its number, on which the channel writes
	unit     int           // the most a Twrite carries and a Tread asks for
	inflight chan struct{} // a token per call in flight
	wake     chan struct{} // (buffered) the writer has something to send
	ended    chan struct{} // closed when the channel ends
	wg       sync.WaitGroup

	mu       sync.Mutex
	next     uint64
	pending  map[string]*chanCall // calls sent and not answered, by id
	queue    []outFrame           // frames waiting for the writer
	err      error                // why the channel ended
	writing  []outFrame           // the frames of the batch being written
	batch    []byte               // the batch's bytes
	off      int                  // how much of batch is written
	piece    int                  // the bytes of the Twrite in flight; 0: none
	reading  bool                 // a Tread is in flight
	stalled  bool                 // the answer being read waits for a slot
	writeBuf []byte               // the writer's messages

	// The answer being read: read by the connection's reader as it takes
	// a Tread's reply, or by the goroutine a stall started (no Tread is
	// in flight meanwhile); ansMu makes the end wait for either.
	ansMu sync.Mutex
	ans   answerState
}

// answerState is where the reading of the answers is.
type answerState struct {
	cur     []byte    // the answer being read
	c       *chanCall // whose it is, once looked for (nil: nobody's, or not known)
	looked  bool      // c was looked for
	held    bool      // cur holds one of the owner's answer slots
	discard bool      // the rest of the answer is dropped: its caller is gone
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

// openChannel makes the call channel of d on file, the client's open fid
// of the device's rpc file, whose number on conn is fid, and starts its
// writer.
func openChannel(d *remoteDevice, conn *deviceConn, file *client.Fid, fid uint32) *channel {
	ch := &channel{d: d, conn: conn, file: file, fid: fid, unit: max(1, min(channelUnit, conn.iounit())),
		inflight: make(chan struct{}, maxChannelCalls), wake: make(chan struct{}, 1),
		ended: make(chan struct{}), pending: map[string]*chanCall{}}
	ch.wg.Add(1)
	go ch.writer()
	conn.setPeer(ch)
	return ch
}

// wait waits for the channel's goroutines to end: they end when the
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
	ch.kick()
}

// kick wakes the writer.
func (ch *channel) kick() {
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
	ch.queue, ch.writing, ch.batch, ch.off = nil, nil, nil, 0
}

// lost ends the channel when its connection fails (rawPeer): the
// connection's reader reads no more, and the answer it was reading gives
// back its slot.
func (ch *channel) lost(err error) {
	ch.end(fmt.Errorf("its call channel failed: %v", err))
	ch.settle()
}

// settle gives back the slot of the answer being read once the channel
// has ended.
func (ch *channel) settle() {
	ch.ansMu.Lock()
	defer ch.ansMu.Unlock()
	ch.mu.Lock()
	ended := ch.err != nil
	ch.mu.Unlock()
	if ended && ch.ans.held {
		<-ch.d.slots
		ch.ans = answerState{}
	}
}

// writer sends the channel's messages until it ends: the next Twrite of
// the frames queued when none is in flight, and a Tread when calls wait
// for answers and none is in flight, both in one write.
func (ch *channel) writer() {
	defer ch.wg.Done()
	for {
		select {
		case <-ch.wake:
		case <-ch.ended:
			return
		}
		ch.mu.Lock()
		if ch.err != nil {
			ch.mu.Unlock()
			return
		}
		msgs := ch.nextLocked(ch.writeBuf[:0])
		ch.writeBuf = msgs
		ch.mu.Unlock()
		if len(msgs) == 0 {
			continue
		}
		if err := ch.conn.writeRaw(msgs); err != nil {
			ch.end(fmt.Errorf("its call channel failed: %v", err))
			return
		}
	}
}

// nextLocked appends to b the messages to send now (see writer). The
// Tread goes first: the device's server starts a handler for each
// message it reads, the last first, so the request starts running before
// the read waits for its answer (which it then finds ready).
func (ch *channel) nextLocked(b []byte) []byte {
	if ch.wantReadLocked() {
		ch.reading = true
		b = appendIO(b, plan9.Tread, chanTagRead, ch.fid, uint32(ch.unit), nil)
	}
	if ch.piece == 0 {
		if ch.off == len(ch.batch) {
			ch.batchLocked()
		}
		if rest := ch.batch[ch.off:]; len(rest) > 0 {
			ch.piece = min(len(rest), ch.unit)
			b = appendIO(b, plan9.Twrite, chanTagWrite, ch.fid, uint32(ch.piece), rest[:ch.piece])
		}
	}
	return b
}

// wantReadLocked reports whether a Tread is to be sent: calls wait for
// answers and none is in flight, nor waits for a slot.
func (ch *channel) wantReadLocked() bool {
	return !ch.reading && !ch.stalled && len(ch.pending) > 0
}

// workLocked reports whether the writer has something to send.
func (ch *channel) workLocked() bool {
	return ch.piece == 0 && (len(ch.queue) > 0 || ch.off < len(ch.batch)) || ch.wantReadLocked()
}

// batchLocked takes the frames queued that fit in one Twrite (a longer
// one alone) as the next batch.
func (ch *channel) batchLocked() {
	ch.writing, ch.batch, ch.off = ch.writing[:0], ch.batch[:0], 0
	for len(ch.queue) > 0 && (len(ch.batch) == 0 || len(ch.batch)+len(ch.queue[0].frame) <= ch.unit) {
		f := ch.queue[0]
		ch.queue[0] = outFrame{}
		ch.queue = ch.queue[1:]
		ch.batch = append(ch.batch, f.frame...)
		ch.writing = append(ch.writing, f)
	}
}

// appendIO appends a Twrite (typ) of data or a Tread of count bytes on
// fid with tag, at offset 0 (the rpc file ignores offsets).
func appendIO(b []byte, typ uint8, tag uint16, fid, count uint32, data []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(23+len(data)))
	b = append(b, typ)
	b = binary.LittleEndian.AppendUint16(b, tag)
	b = binary.LittleEndian.AppendUint32(b, fid)
	b = binary.LittleEndian.AppendUint64(b, 0)
	b = binary.LittleEndian.AppendUint32(b, count)
	return append(b, data...)
}

// reply takes the device's reply to one of the channel's messages, in
// the connection's reader (rawPeer): an error ends the connection.
func (ch *channel) reply(msg []byte) error {
	typ, tag := msg[4], binary.LittleEndian.Uint16(msg[5:7])
	var ename string
	if typ == plan9.Rerror {
		f, err := plan9.UnmarshalFcall(msg)
		if err != nil {
			return fmt.Errorf("the device sent a malformed Rerror: %v", err)
		}
		ename = oneLine(f.Ename, maxErrorText)
	}
	switch tag {
	case chanTagWrite:
		if typ != plan9.Rwrite && typ != plan9.Rerror || typ == plan9.Rwrite && len(msg) != 11 {
			return fmt.Errorf("the device answered a Twrite with a message of type %d", typ)
		}
		return ch.wrote(msg, ename)
	case chanTagRead:
		if typ != plan9.Rread && typ != plan9.Rerror || typ == plan9.Rread && (len(msg) < 11 || int(binary.LittleEndian.Uint32(msg[7:11])) != len(msg)-11) {
			return fmt.Errorf("the device answered a Tread with a malformed message of type %d", typ)
		}
		ch.mu.Lock()
		was := ch.reading
		ch.reading = false
		ch.mu.Unlock()
		switch {
		case !was:
			return errors.New("the device answered a Tread not sent")
		case typ == plan9.Rerror:
			ch.end(fmt.Errorf("its call channel failed: %s", ename))
		case len(msg) == 11:
			ch.end(errors.New("its call channel failed: end of file"))
		default:
			ch.ansMu.Lock()
			more := ch.cut(msg[11:])
			ch.ansMu.Unlock()
			if more {
				ch.kickIfWork() // the next Tread, if calls still wait
			}
		}
		return nil
	}
	return fmt.Errorf("the device answered tag %d, which no request has", tag)
}

// wrote takes the reply to the Twrite in flight: the next piece of the
// batch follows, or the next batch; a write the device refused (an
// Rerror, or less taken than written) fails the calls of the batch.
func (ch *channel) wrote(msg []byte, ename string) error {
	ch.mu.Lock()
	piece := ch.piece
	if ch.err != nil {
		ch.mu.Unlock()
		return nil // the calls have failed already
	}
	if piece == 0 {
		ch.mu.Unlock()
		return errors.New("the device answered a Twrite not sent")
	}
	ch.piece = 0
	var refused []outFrame
	if ename == "" && int(binary.LittleEndian.Uint32(msg[7:11])) != piece {
		ename = fmt.Sprintf("it took %d of %d bytes", binary.LittleEndian.Uint32(msg[7:11]), piece)
	}
	if ename != "" {
		refused = slices.Clone(ch.writing)
		ch.writing, ch.batch, ch.off = ch.writing[:0], ch.batch[:0], 0
	} else if ch.off += piece; ch.off == len(ch.batch) {
		ch.writing = ch.writing[:0]
	}
	ch.mu.Unlock()
	if refused != nil {
		ch.refused(refused, ename)
	}
	ch.kickIfWork()
	return nil
}

// kickIfWork wakes the writer if it has something to send.
func (ch *channel) kickIfWork() {
	ch.mu.Lock()
	work := ch.err == nil && ch.workLocked()
	ch.mu.Unlock()
	if work {
		ch.kick()
	}
}

// refused fails the calls whose requests the device refused to take.
func (ch *channel) refused(sent []outFrame, why string) {
	fail := abi.E(abi.Path(ch.d.id), abi.Offline, fmt.Sprintf("device %q refused the request: %s", ch.d.id, why))
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

// cut reads data, the next bytes of the answers, into answers and hands
// each to its caller. It reports whether the reading goes on: false when
// the channel ended, or when an answer waits for a slot (a goroutine of
// the channel then waits for one, and goes on with the rest of data).
func (ch *channel) cut(data []byte) bool {
	a := &ch.ans
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		piece := data
		if i >= 0 {
			piece = data[:i]
		}
		if !a.discard {
			if len(a.cur)+len(piece) > abi.MaxAnswer {
				ch.tooLarge(append(a.cur, piece[:min(len(piece), 256)]...))
				if a.held {
					<-ch.d.slots
				}
				*a = answerState{}
				return false
			}
			if !a.held && len(a.cur)+len(piece) > answerSlotAfter {
				if !a.looked {
					a.c, a.looked = ch.whose(append(a.cur, piece[:min(len(piece), 256)]...)), true
				}
				select {
				case ch.d.slots <- struct{}{}:
					a.held = true
				default:
					return ch.stall(slices.Clone(data))
				}
			}
			if !a.discard {
				a.cur = append(a.cur, piece...)
			}
		}
		if i < 0 {
			break
		}
		data = data[i+1:]
		if !a.discard && !ch.deliver(a.cur, a.held) {
			*a = answerState{}
			return false
		}
		*a = answerState{}
	}
	return true
}

// stall waits, in a goroutine of the channel, for a slot for the answer
// being read (unless its caller gives up or the channel ends first),
// then reads the rest of data, and lets the writer send the next Tread.
// No Tread is sent meanwhile. It reports false. ansMu is held (by the
// caller here, by the goroutine when it reads).
func (ch *channel) stall(data []byte) bool {
	ch.mu.Lock()
	if ch.err != nil {
		ch.mu.Unlock()
		return false
	}
	ch.stalled = true
	ch.wg.Add(1)
	ch.mu.Unlock()
	c := ch.ans.c
	go func() {
		defer ch.wg.Done()
		defer ch.settle()
		got := ch.takeSlot(c)
		ch.ansMu.Lock()
		a := &ch.ans
		switch got {
		case slotTaken:
			a.held = true
		case slotCallerGone:
			a.discard, a.cur = true, nil
		case slotEnded:
			ch.ansMu.Unlock()
			return
		}
		more := ch.cut(data)
		ch.ansMu.Unlock()
		if !more {
			return
		}
		ch.mu.Lock()
		ch.stalled = false
		ch.mu.Unlock()
		ch.kickIfWork()
	}()
	return false
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
