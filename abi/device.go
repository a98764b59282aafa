package abi

// Device routing: fs.* and shell.exec carry an optional target that
// selects the device the call runs on. None, or LocalTarget, is the
// daemon's own device.

// LocalTarget names the daemon's own device.
const LocalTarget = "gsv"

// Routed is implemented by the args of every routable syscall.
type Routed interface {
	// RouteTarget is the device the call asks for ("" for the local one).
	RouteTarget() string
}

// RouteTarget implements Routed.
func (a *FSReadArgs) RouteTarget() string { return a.Target }

// RouteTarget implements Routed.
func (a *FSWriteArgs) RouteTarget() string { return a.Target }

// RouteTarget implements Routed.
func (a *FSEditArgs) RouteTarget() string { return a.Target }

// RouteTarget implements Routed.
func (a *FSDeleteArgs) RouteTarget() string { return a.Target }

// RouteTarget implements Routed.
func (a *FSSearchArgs) RouteTarget() string { return a.Target }

// RouteTarget implements Routed.
func (a *ShellExecArgs) RouteTarget() string { return a.Target }
