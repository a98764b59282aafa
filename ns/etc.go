package ns

import (
	"fmt"
	"strings"

	"gsvfs.dev/gsvfs/abi"
)

// renderPasswd renders users as /etc/passwd.
func renderPasswd(us []abi.User) []byte {
	var b strings.Builder
	for _, u := range us {
		fmt.Fprintf(&b, "%s:x:%d:%d:%s:%s:/bin/sh\n", u.Username, u.Uid, u.Gid, u.Gecos, u.Home)
	}
	return []byte(b.String())
}

// renderGroup renders groups as /etc/group.
func renderGroup(gs []abi.Group) []byte {
	var b strings.Builder
	for _, g := range gs {
		fmt.Fprintf(&b, "%s:x:%d:%s\n", g.Name, g.Gid, strings.Join(g.Members, ","))
	}
	return []byte(b.String())
}
