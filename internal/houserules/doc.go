// Package houserules holds no code: its tests check the import rules of
// the tree with go list, and rules of the source with go/parser (see
// source_test.go and docs/hardening.md, The house):
//
//   - no string literal outside abi and the frame decoder is a syscall's
//     or a signal's name (Migrate's component names aside);
//   - no SQL outside kernel/ writes the kernel's tables;
//   - map[string]any outside tests is counted and bounded.
//
// The import rules:
//
//   - kernel and kernel/kerneltest import no vfs, transport, namespace or
//     room (vfs, vfs/..., ninep, ns, proc, ipc, sched, devices,
//     devices/..., notify, mcp);
//   - vfs, vfs/... and ninep import nothing of GSV but each other;
//   - the rooms, proc, ipc, sched, devices (with devices/...), notify
//     and mcp, never import each other;
//     the one exception is wiring in tests, which stand a system up as
//     gsvfs does and reach the rooms only through the dispatcher: the
//     tests of proc, ipc, sched and mcp, the devices room (the real data
//     tree their files live in, exec sessions); proc's, the ipc room (processes that talk);
//     ipc's, the process room (the processes that talk); pkgs's, the
//     rooms a package installs into (devices, repos, sched, mcp, proc);
//     sched's tests never import proc;
//   - devices/local links no kernel and no SQLite (outside its tests): it
//     is what a device daemon links, and reaches the kernel only through
//     the Host the router gives it;
//   - devices/export links no kernel and no SQLite, its tests included:
//     the device daemon links it on a machine that has no kernel;
//   - ns imports of GSV only kernel, abi (and abi/schema) and vfs; its tests may also
//     import kernel/kerneltest and the transports (vfs/..., ninep) whose
//     view of the namespace they check;
//   - cmd/gsv imports of GSV only abi, and ninep's 9P client (with the
//     vfs that ninep imports) for mounts;
//   - mcpserve (gsvfs as an MCP server) imports of GSV only abi,
//     abi/schema and ninep's 9P client (with its vfs); its tests also
//     vfs/vfstest: it is a transport onto the dispatcher, no room;
//   - abi/schema imports of GSV only abi;
//   - abi imports nothing of GSV.
//
// A rule holds for a package's tests too, and for what it imports
// through other packages (go list's Deps), not only directly.
//
// Besides the imports: no non-test Go file is over 800 lines
// (TestFileSize), but the few being split now, a list that only
// shrinks; no non-test Go file writes a JSON Schema in a string
// (TestSchemasFromTypes): schemas are inferred from types by abi/schema.
//
// And the storage rules (sql_test.go; docs/architecture.md, *Portable
// SQL*): no file but the SQLite dialect (kernel/sqlite.go) says what only
// SQLite says, asks for LastInsertId, runs SQL on Store.R or imports the
// SQLite driver (TestPortableSQL); SQL is only in the packages that own
// tables, naming only their own (TestSQLInTableOwners: the ipc room owns
// proc_ipc_calls and proc_watches, which proc's migration history made);
// no write's error is dropped (TestStoreWritesChecked).
//
// And the rooms' shape (rooms_test.go): proc.Manager declares at most 60
// methods (the run engine and the ipc room hold the rest), and every
// mutex of proc and ipc says in its comment what it guards.
package houserules
