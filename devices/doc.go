// Package devices will hold remote devices that dial the kernel and serve
// their own filesystem and shell back over 9P under /dev/<id>/. Nothing is
// implemented yet. Until then fs.* and shell.exec calls with a device target
// fail with 503 (no active connection).
package devices
