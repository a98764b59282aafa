// Package houserules holds no code: its test checks the import rules of
// the tree with go list.
//
//   - kernel and kernel/kerneltest import no vfs, transport, namespace or
//     room (vfs, vfs/..., ninep, ns, proc, sched, devices, devices/...);
//   - vfs, vfs/... and ninep import nothing of GSV but each other;
//   - proc, sched and devices (with devices/...) never import each other;
//     the one exception is that the tests of proc and sched stand a system
//     up with the devices room, the real data tree their files live in
//     (wiring, as gsvfs does; they reach it only through the dispatcher);
//     sched's tests never import proc;
//   - abi imports nothing of GSV.
//
// A rule holds for a package's tests too, and for what it imports
// through other packages (go list's Deps), not only directly.
package houserules
