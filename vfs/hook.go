package vfs

// RequestHook learns of each request a transport has answered: its
// operation (9P: "walk", "read", ...; FUSE: "lookup", "getattr", ...)
// and whether it failed (an Rerror; a FUSE status other than OK). The
// daemon wires it to its metrics; the transports know nothing more of
// it. It runs on the request's goroutine and must return at once.
type RequestHook func(op string, failed bool)
