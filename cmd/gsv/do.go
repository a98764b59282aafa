package main

import (
	"encoding/json"
	"fmt"
	"reflect"

	"gsvfs.dev/gsvfs/abi"
)

// get is call by a syscall's name: it makes the syscall name with args
// and returns its result decoded into an R. Prefer call, whose descriptor
// gives the args and result types.
func get[R any](c *cli, name string, args any) (*R, error) {
	data, err := c.call(name, args)
	if err != nil {
		return nil, err
	}
	r := new(R)
	if err := decodeResult(data, r); err != nil {
		return nil, err
	}
	return r, nil
}

// decodeResult decodes a syscall's result; a result that does not fit is
// an error that shows it.
func decodeResult(data json.RawMessage, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("bad result %s: %w", data, err)
	}
	return nil
}

// call makes the syscall d with args (nil: none) and returns its result,
// decoded into R, the type its handler returns: the calls a command makes
// for what it needs (a pid, a uid) rather than to print. A result that
// does not decode into R, or a null where R is a record, is an error.
func call[A, R any](c *cli, d abi.Call[A, R], args *A) (R, error) {
	data, err := callRaw(c, d, args)
	if err != nil {
		var zero R
		return zero, err
	}
	return decodeAs[R](data)
}

// show makes the syscall d with args (nil: none) and, unless --json asked
// for the raw result, prints its result with render: a command of gsv is
// its flags made into d's args, its output what render makes of d's result.
func show[A, R any](c *cli, d abi.Call[A, R], args *A, render func(r R) error) error {
	data, err := callRaw(c, d, args)
	if err != nil || c.json {
		return c.orJSON(data, err)
	}
	r, err := decodeAs[R](data)
	if err != nil {
		return err
	}
	return render(r)
}

// callRaw makes the syscall d with args (nil: none) and returns its
// result's JSON as the daemon sent it: for a command that prints it as it
// is, or reads it more than one way.
func callRaw[A, R any](c *cli, d abi.Call[A, R], args *A) (json.RawMessage, error) {
	var in any = args
	if args == nil {
		in = new(A)
	}
	return c.call(d.Name, in)
}

// decodeAs decodes a syscall's result into an R.
func decodeAs[R any](data json.RawMessage) (R, error) {
	var r R
	if err := decodeResult(data, &r); err != nil {
		return r, err
	}
	if v := reflect.ValueOf(&r).Elem(); v.Kind() == reflect.Pointer && v.IsNil() {
		return r, fmt.Errorf("bad result %s: want a record", data)
	}
	return r, nil
}
