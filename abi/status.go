package abi

// SysStatus is the daemon's health (gsv status).
var SysStatus = Call[DaemonStatusArgs, *DaemonStatus]{Name: "sys.status", Grant: Users, Flags: Read,
	Doc: "The daemon's health: version, uptime, store size, devices, adapter accounts, runs, queues, audit log, last internal errors."}

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
	// Adapters are the chat adapters' accounts, newest activity first.
	Adapters []DaemonAdapter `json:"adapters"`
	// OutboxPending counts the adapters' deliveries not yet taken by a
	// bridge (the outbox queue's depth).
	OutboxPending int `json:"outboxPending"`
	// SchedQueued counts the schedule runs due and waiting for a slot
	// (the scheduler's queue depth); SchedRunning those under way.
	SchedQueued  int `json:"schedQueued"`
	SchedRunning int `json:"schedRunning"`
}

// DaemonAdapter is one chat adapter account in sys.status: online when
// its bridge last reported it connected; its last error, if any; its
// deliveries waiting in the outbox.
type DaemonAdapter struct {
	Adapter      string `json:"adapter"`
	AccountID    string `json:"accountId"`
	Online       bool   `json:"online"`
	Want         string `json:"want,omitempty"`
	LastActivity int64  `json:"lastActivity,omitempty"`
	Error        string `json:"error,omitempty"`
	Pending      int    `json:"pending"`
}

// DaemonError is one of the last internal errors (code 500 and up) the
// dispatcher returned.
type DaemonError struct {
	Time    int64  `json:"time"`
	Syscall string `json:"syscall"`
	Code    int    `json:"code"`
	Error   string `json:"error"`
}
