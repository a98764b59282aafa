package abi

// CodeMode's syscalls: a JavaScript block whose shell and fs calls are a
// process's syscalls (docs/codemode.md).
var (
	CodemodeRun = Call[CodeModeRunArgs, *CodeModeResult]{Name: "codemode.run", Grant: Users,
		Doc: "Runs a JavaScript block as one of the caller's processes (default: their init); its calls are that process's."}
	CodemodeExec = Call[CodeModeExecArgs, *CodeModeResult]{Name: "codemode.exec", Grant: Users, Flags: Internal,
		Doc: "Runs a JavaScript block as the calling process, under its approval policy: the agent's CodeMode tool."}
)
