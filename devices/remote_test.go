package devices

import (
	"bufio"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

// FuzzHello: whatever a device says first, readHello returns a hello it
// checked (a valid id, implements only routable syscalls) or a 400, and
// never panics.
func FuzzHello(f *testing.F) {
	for _, s := range []string{
		abi.DeviceMagic + `{"id":"laptop","token":"gsv_node_x","platform":"linux/amd64","version":"1","implements":["fs.read","shell.exec"]}` + "\n",
		abi.DeviceMagic + `{"id":"../x","token":"t","platform":"p","version":"v","implements":[]}` + "\n",
		abi.DeviceMagic + "{garbage\n", "GSVD", "\x13\x00\x00\x00d", abi.DeviceMagic + `{"id":"a","implements":["sys.user.add"]}` + "\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		h, err := readHello(bufio.NewReaderSize(strings.NewReader(s), 4096))
		if err != nil {
			if abi.KindOf(err) != abi.Invalid {
				t.Fatalf("readHello(%q): %v, want a 400", s, err)
			}
			return
		}
		if abi.CheckDeviceID(h.ID) != nil {
			t.Fatalf("readHello(%q) accepted id %q", s, h.ID)
		}
		for _, c := range h.Implements {
			if !strings.HasPrefix(c, "fs.") && c != "shell.exec" {
				t.Fatalf("readHello(%q) accepted implements %q", s, c)
			}
		}
	})
}
