// Package devices is the device router: the room that serves the
// routable syscalls (the fs.* file tools and shell.exec) and sends each
// to the device its args' target names, and the registry of devices.
//
// The target "gsv", or none, is the local device (package devices/local),
// which also serves exec sessions (process.*) and their files (/dev/gsv,
// /var/blobs). Any other target is a remote device: a device daemon
// (gsvfs device, serving package devices/export) that dialed the kernel,
// said its hello with a node token bound to its id, and serves its tree
// over 9P on that connection (ServeDevice, SplitListener). The seed's
// checks before a call reaches a device (403 access denied to the device,
// 503 offline or no connection, 400 not implemented) live here once, for
// every device, as do its deadline (504) and the routing of a shell
// session to the device that runs it. /dev/<id> shows each registered
// device: its status, and its files over its live connection.
package devices
