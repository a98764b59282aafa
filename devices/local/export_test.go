package local

// Limits of shell.exec, for the external tests.
const (
	ShellKillGrace = shellKillGrace
	MaxShellOutput = maxShellOutput
)
