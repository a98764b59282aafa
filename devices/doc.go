// Package devices is the device router: the room that serves the
// routable syscalls (the fs.* file tools and shell.exec) and sends each
// to the device its args' target names. The target "gsv", or none, is
// the local device (package devices/local), the only one today. The
// seed's checks before a call reaches a device (403 access denied to the
// device, 503 offline or no connection, 400 not implemented) live here
// once, for every device; 504 (timed out) comes with remote devices,
// whose calls can time out on the way.
package devices
