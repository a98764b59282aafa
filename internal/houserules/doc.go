// Package houserules holds no code: its test checks the import rules of
// the tree with go list.
//
//   - kernel and kernel/kerneltest import no vfs, transport, namespace or
//     room (vfs, vfs/..., ninep, ns, proc, ipc, sched, devices,
//     devices/..., notify);
//   - vfs, vfs/... and ninep import nothing of GSV but each other;
//   - the rooms, proc, ipc, sched, devices (with devices/...) and notify,
//     never import each other;
//     the one exception is wiring in tests, which stand a system up as
//     gsvfs does and reach the rooms only through the dispatcher: the
//     tests of proc, ipc and sched, the devices room (the real data tree
//     their files live in); proc's, the ipc room (processes that talk);
//     ipc's, the process room (the processes that talk); sched's tests
//     never import proc;
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
// Its other tests read the rooms' sources (go/parser): proc.Manager
// declares at most 60 methods (the run engine and the ipc room hold the
// rest); no Go file of proc or ipc is over 800 lines; every mutex there
// says in its comment what it guards; and no room but ipc names the ipc
// room's tables (proc's migration history aside).
package houserules
