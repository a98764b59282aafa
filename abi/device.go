package abi

// Device routing: fs.* and shell.exec carry an optional target that
// selects the device the call runs on (the Target field of their args).
// None, or LocalTarget, is the daemon's own device.

// LocalTarget names the daemon's own device.
const LocalTarget = "gsv"

// Device is a device's record (the seed's descriptor): its id, owner,
// description, what it runs and serves, whether a connection of it is
// live, and when it was first seen, last connected and disconnected,
// last seen (Unix ms; null until set). Groups are the groups granted its
// use (ours).
type Device struct {
	DeviceID       string   `json:"deviceId"`
	OwnerUid       uint32   `json:"ownerUid"`
	Description    string   `json:"description"`
	Platform       string   `json:"platform"`
	Version        string   `json:"version"`
	Online         bool     `json:"online"`
	LastSeenAt     int64    `json:"lastSeenAt"`
	Implements     []string `json:"implements"`
	FirstSeenAt    int64    `json:"firstSeenAt"`
	ConnectedAt    *int64   `json:"connectedAt"`
	DisconnectedAt *int64   `json:"disconnectedAt"`
	Groups         []string `json:"groups"`
}

// DeviceListArgs are sys.device.list's args: offline devices are listed
// only if IncludeOffline.
type DeviceListArgs struct {
	IncludeOffline bool `json:"includeOffline,omitempty"`
}

// DeviceListResult is sys.device.list's result: the devices the caller
// may use (root: all), by id; never null.
type DeviceListResult struct {
	Devices []Device `json:"devices"`
}

// DeviceGetArgs are sys.device.get's args.
type DeviceGetArgs struct {
	DeviceID string `json:"deviceId"`
}

// DeviceGetResult is sys.device.get's, sys.device.update's,
// sys.device.grant's and sys.device.remove's result: the device (as it
// was, for remove), or null if there is none the caller may use (update:
// none the caller owns).
type DeviceGetResult struct {
	Device *Device `json:"device"`
}

// DeviceRemoveArgs are sys.device.remove's args (ours): the owner (or
// root) removes the device from the registry.
type DeviceRemoveArgs struct {
	DeviceID string `json:"deviceId"`
}

// DeviceUpdateArgs are sys.device.update's args: the owner (or root) sets
// the description.
type DeviceUpdateArgs struct {
	DeviceID    string `json:"deviceId"`
	Description string `json:"description"`
}

// DeviceGrantArgs are sys.device.grant's args (ours): the owner (or root)
// grants group the use of the device, or takes it back (Revoke).
type DeviceGrantArgs struct {
	DeviceID string `json:"deviceId"`
	Group    string `json:"group"`
	Revoke   bool   `json:"revoke,omitempty"`
}

// DeviceHello is what a device daemon says first on a connection to the
// kernel, after the DeviceMagic line, as one JSON line: its id, the node
// token bound to that id, its platform and version, and the syscalls it
// serves.
type DeviceHello struct {
	ID         string   `json:"id"`
	Token      string   `json:"token"`
	Platform   string   `json:"platform"`
	Version    string   `json:"version"`
	Implements []string `json:"implements"`
}

// DeviceWelcome is the kernel's one-line JSON answer to a hello: OK, or
// the Error that ends the connection. After an OK the connection carries
// 9P2000 with the kernel as the client of the device's tree.
type DeviceWelcome struct {
	OK           bool   `json:"ok"`
	Error        string `json:"error,omitempty"`
	ConnectionID string `json:"connectionId,omitempty"`
}

// DeviceMagic is the first line a device daemon writes on its
// connection: it tells a device from a 9P client on the same listener
// (a 9P message starts with its size, whose four bytes these are not).
const DeviceMagic = "GSVDEVICE 1\n"
