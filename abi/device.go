package abi

// Device routing: fs.* and shell.exec carry an optional target that
// selects the device the call runs on (the Target field of their args).
// None, or LocalTarget, is the daemon's own device.

// LocalTarget names the daemon's own device.
const LocalTarget = "gsv"
