package abi

import (
	"database/sql"
	"encoding/json"
)

// CapValue is a narrowing as a store keeps it (a process_cap column):
// its JSON, NULL for nil (narrows nothing).
func CapValue(pc *ProcessCap) sql.NullString {
	if pc == nil {
		return sql.NullString{}
	}
	b, err := json.Marshal(pc)
	if err != nil { // a ProcessCap always encodes
		return sql.NullString{String: "{}", Valid: true}
	}
	return sql.NullString{String: string(b), Valid: true}
}

// CapFromValue decodes a stored narrowing (CapValue): NULL narrows
// nothing (nil); a value that does not decode (a damaged store) allows
// nothing, never more.
func CapFromValue(v sql.NullString) *ProcessCap {
	if !v.Valid {
		return nil
	}
	var pc ProcessCap
	if err := json.Unmarshal([]byte(v.String), &pc); err != nil {
		return &ProcessCap{Networks: []string{}, Mounts: []CapMount{}}
	}
	return &pc
}
