// Package houserules holds no code: its test checks the import rules of
// the tree with go list.
//
//   - kernel and kernel/kerneltest import no vfs, transport, namespace or
//     room (vfs, vfs/..., ninep, ns, proc, sched, devices, devices/...,
//     notify);
//   - vfs, vfs/... and ninep import nothing of GSV but each other;
//   - proc, sched, devices (with devices/...) and notify never import
//     each other;
//     the one exception is that the tests of proc and sched stand a system
//     up with the devices room, the real data tree their files live in
//     (wiring, as gsvfs does; they reach it only through the dispatcher);
//     sched's tests never import proc;
//   - devices/local links no kernel and no SQLite (outside its tests): it
//     is what a device daemon links, and reaches the kernel only through
//     the Host the router gives it;
//   - devices/export links no kernel and no SQLite, its tests included:
//     the device daemon links it on a machine that has no kernel;
//   - ns imports of GSV only kernel, abi and vfs; its tests may also
//     import kernel/kerneltest and the transports (vfs/..., ninep) whose
//     view of the namespace they check;
//   - cmd/gsv imports of GSV only abi, and ninep's 9P client (with the
//     vfs that ninep imports) for mounts;
//   - abi imports nothing of GSV.
//
// A rule holds for a package's tests too, and for what it imports
// through other packages (go list's Deps), not only directly.
//
// Besides the imports: no non-test Go file is over 800 lines
// (TestFileSize), but the few being split now, a list that only
// shrinks.
package houserules
