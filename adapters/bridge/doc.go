// Package bridge runs chat platforms' adapters as bridges to the kernel
// (gsvfs adapter KIND): a bridge dials the kernel as a device does, with
// a service token bound to its adapter, hands each message an account
// receives to adapter.inbound, reports the account's state with
// adapter.state.update, and serves the kernel's adapter.send on its call
// channel. Each platform is one Adapter, in one file, on the platform's
// own client library. docs/adapters.md is the user's side.
package bridge
