package main

import (
	"strings"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// compFunc is a cobra completion function.
type compFunc = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// pidArgs are the commands whose argument at that index is a pid.
var pidArgs = []struct {
	path []string
	at   int
}{
	{[]string{"kill"}, 0}, {[]string{"abort"}, 0}, {[]string{"chat"}, 0}, {[]string{"send"}, 0},
	{[]string{"run"}, 0}, {[]string{"continue"}, 0}, {[]string{"stop"}, 0}, {[]string{"start"}, 0},
	{[]string{"supervise"}, 0},
	{[]string{"ipc", "send"}, 0}, {[]string{"ipc", "call"}, 0},
	{[]string{"watch"}, 1},
}

// pidFlags are the flags, of any command, whose value is a pid.
var pidFlags = []string{"pid", "from", "worker"}

// addCompletions gives gsv's commands their completions from the daemon:
// a pid completes from the caller's processes (proc.list), `gsv call`'s
// NAME from the syscalls the caller may make (sys.syscall.list). Session
// ids and device ids complete where their commands are made. A command
// that already completes its arguments keeps its own completion.
func (c *cli) addCompletions(root *cobra.Command) {
	for _, p := range pidArgs {
		if cmd := findCmd(root, p.path...); cmd != nil && cmd.ValidArgsFunction == nil {
			cmd.ValidArgsFunction = c.completePidAt(p.at)
		}
	}
	if cmd := findCmd(root, "call"); cmd != nil && cmd.ValidArgsFunction == nil {
		cmd.ValidArgsFunction = c.completeSyscall
	}
	var walk func(cmd *cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, name := range pidFlags {
			if cmd.Flags().Lookup(name) != nil {
				if _, ok := cmd.GetFlagCompletionFunc(name); !ok {
					_ = cmd.RegisterFlagCompletionFunc(name, c.completePid)
				}
			}
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// findCmd returns root's subcommand at path, or nil.
func findCmd(root *cobra.Command, path ...string) *cobra.Command {
	cmd, rest, err := root.Find(path)
	if err != nil || len(rest) != 0 || cmd == root {
		return nil
	}
	return cmd
}

// completePidAt completes the argument at index at with a pid, and no
// other argument.
func (c *cli) completePidAt(at int) compFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) != at {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return c.completePid(cmd, args, toComplete)
	}
}

// completePid lists the caller's pids that start with toComplete, each
// described by its profile, state and label.
func (c *cli) completePid(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	r, err := call(c, abi.ProcList, &abi.ListArgs{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var out []string
	for _, p := range r.Processes {
		if strings.HasPrefix(p.Pid, toComplete) {
			desc := cell(p.Profile) + " " + cell(p.State)
			if p.Label != nil && *p.Label != "" {
				desc += " " + cell(*p.Label)
			}
			out = append(out, p.Pid+"\t"+desc)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeSyscall completes gsv call's NAME with the syscalls the caller
// may make, and its ARGS-JSON with nothing.
func (c *cli) completeSyscall(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) != 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	r, err := call(c, abi.SysSyscallList, &abi.SyscallListArgs{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var out []string
	for _, name := range r.Syscalls {
		if strings.HasPrefix(name, toComplete) {
			out = append(out, name)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
