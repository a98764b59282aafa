package abi

import "encoding/json"

// The sys domain: users, groups, tokens, configuration and setup
// (seed 003, sys.*). The kernel serves these.

// ConfigGetArgs are sys.config.get's args: a key, or a prefix ending in
// "/" (or "" for every visible key).
type ConfigGetArgs struct {
	Key string `json:"key"`
}

// ConfigSetArgs are sys.config.set's args. Value is any JSON value; a
// string is stored as it is, anything else as its JSON text.
type ConfigSetArgs struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}
