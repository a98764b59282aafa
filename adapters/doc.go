// Package adapters is the adapters room: chat platforms reaching agents
// (seed 003 adapter.*, sys.link*; seed 004 identity links, surface and
// run routes). Bridges (gsvfs adapter KIND, package adapters/bridge)
// speak for platform accounts with service tokens bound to their kind;
// the room keeps the accounts' state, the identity links a user makes
// with link codes, the chats' routes to processes, a durable receipt of
// every linked message and the outbound ledger every reply goes
// through. It meets proc only in the dispatcher: a linked message is a
// proc.send made as the linked user. docs/adapters.md is the user's
// side.
package adapters
