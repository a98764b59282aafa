package main

import (
	"encoding/json"
	"fmt"
)

// do makes the syscall name with args and, unless --json asked for the
// raw result, decodes the result into an R and prints it with show. Every
// command of gsv is a call of do: its flags become args (an abi type), its
// output is show's rendering of the result (an abi type).
func do[R any](c *cli, name string, args any, show func(r *R) error) error {
	data, err := c.call(name, args)
	if err != nil || c.json {
		return c.orJSON(data, err)
	}
	r := new(R)
	if err := decodeResult(data, r); err != nil {
		return err
	}
	return show(r)
}

// get makes the syscall name with args and returns its result decoded
// into an R: the calls a command makes for what it needs (a pid, a uid)
// rather than to print.
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
