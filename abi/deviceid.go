package abi

import (
	"fmt"
	"slices"
)

// MaxDeviceID is the longest device id, in bytes.
const MaxDeviceID = 64

// DevFiles are the files of /dev every Unix has (null, zero, random,
// urandom): a device may not take their names, since a device is bound
// at /dev/<id>.
var DevFiles = []string{"null", "random", "urandom", "zero"}

// CheckDeviceID reports whether id may name a device: 1 to MaxDeviceID
// characters of a-z, 0-9, '.', '_' and '-', not "." or "..", not
// LocalTarget, which names the daemon's own device, and not one of
// DevFiles. The error is Invalid
// and names the id.
func CheckDeviceID(id string) error {
	bad := func(why string) error {
		return E(Path(id), Invalid, fmt.Sprintf("device id %q: %s", id, why))
	}
	switch {
	case id == "":
		return E(Invalid, "a device id is empty")
	case len(id) > MaxDeviceID:
		return bad(fmt.Sprintf("longer than %d characters", MaxDeviceID))
	case id == LocalTarget:
		return bad("it names the kernel's own device")
	case id == "." || id == "..":
		return bad("not a name")
	case slices.Contains(DevFiles, id):
		return bad("it names a file of /dev")
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return bad("want only a-z, 0-9, '.', '_' and '-'")
		}
	}
	return nil
}
