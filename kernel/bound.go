package kernel

import (
	"context"
	"encoding/json"

	"gsvfs.dev/gsvfs/abi"
)

// Bound is a syscall bound to its args, ready to be made (Make): what a
// ctl line becomes. Make one with Bind; the zero Bound names no syscall.
type Bound struct {
	name  string
	args  any        // *A, or nil
	fresh func() any // new(A), for JSON args when args is nil
}

// Bind binds the syscall d to args (nil: JSON args, or a zero A).
func Bind[A, R any](d abi.Call[A, R], args *A) Bound {
	b := Bound{name: d.Name, fresh: func() any { return new(A) }}
	if args != nil {
		b.args = args
	}
	return b
}

// Name returns the name of the bound syscall ("" for the zero Bound).
func (b Bound) Name() string { return b.name }

// Args returns the args b is bound to (nil: none yet).
func (b Bound) Args() any { return b.args }

// WithJSON returns b with raw, a JSON args object, decoded strictly into
// its args (DecodeArgs: an unknown field is a 400): into the args b was
// bound to, which carry a file's context (its pid), or into fresh ones.
func (b Bound) WithJSON(raw json.RawMessage) (Bound, error) {
	switch {
	case b.args != nil:
		return b, DecodeArgs(raw, b.args)
	case b.fresh != nil:
		a := b.fresh()
		if err := DecodeArgs(raw, a); err != nil {
			return b, err
		}
		b.args = a
		return b, nil
	}
	return b, abi.E(abi.Invalid, "no syscall")
}

// Make makes the bound syscall as c, through the dispatcher (Call).
func (k *Kernel) Make(ctx context.Context, c *Caller, b Bound) (any, error) {
	return k.Call(ctx, c, b.name, b.args)
}
