// Package notify is the notification room: per-user notifications that a
// user, or a process acting for them, leaves for that user to read.
//
// # The room
//
// A Room is a room of the namespace (ns.Room). Open migrates its table
// (and grants the users group notification.*); ns.Space.Add registers its
// syscall table (Syscalls), binds /var/notify (Mounts) and calls Start,
// which starts the janitor. Close stops the janitor and waits for it.
//
// # Syscalls
//
// notification.create, notification.list, notification.mark_read and
// notification.dismiss take and return the types of abi/notify.go (seed
// 003). Every call acts on the caller's own notifications, root's
// included: another user's notification is, to its caller, not there.
// The Internal notification.files and notification.file serve the
// files. mark_read and dismiss made through /var/notify/ctl answer an id
// that is not there with 404 instead of null, so that the write fails.
//
// # Expiry
//
// Every notification expires: 30 days after it is made unless ttlMs says
// otherwise (clamped to 1 second through 90 days), 7 days after it is
// read, 3 days after it is dismissed. An expired notification is gone to
// every call and file at once. Reads are free: a list or a read never
// writes, so it filters expired rows out; the writes (create, mark_read,
// dismiss) and the janitor, hourly, delete them.
//
// # Files
//
// /var/notify/<user>/<id> renders one live notification (not dismissed,
// not expired) of user as indented JSON; only the user and root may list
// or read /var/notify/<user>. /var/notify/ctl takes create, read and
// dismiss lines; /var/notify/err is the caller's last failure there.
package notify
