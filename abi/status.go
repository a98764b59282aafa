package abi

// SysStatus is the daemon's health (gsv status).
var SysStatus = Call[DaemonStatusArgs, *DaemonStatus]{Name: "sys.status", Grant: Users, Flags: Read,
	Doc: "The daemon's health: version, uptime, store size, devices, runs, audit log, last internal errors."}

// DaemonStatusArgs are sys.status's args: none.
type DaemonStatusArgs struct{}

// DaemonStatus is sys.status's answer. A part the daemon does not run
// (no devices room) is zero.
type DaemonStatus struct {
	Version       string        `json:"version"`
	UptimeMs      int64         `json:"uptimeMs"`
	StoreBytes    int64         `json:"storeBytes"`
	DevicesOnline int           `json:"devicesOnline"`
	DevicesTotal  int           `json:"devicesTotal"`
	RunsActive    int           `json:"runsActive"`
	AuditPending  int64         `json:"auditPending"`
	LastErrors    []DaemonError `json:"lastErrors"`
}

// DaemonError is one of the last internal errors (code 500 and up) the
// dispatcher returned.
type DaemonError struct {
	Time    int64  `json:"time"`
	Syscall string `json:"syscall"`
	Code    int    `json:"code"`
	Error   string `json:"error"`
}
