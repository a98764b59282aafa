package main

// gsv fork and gsv workspace: processes' workspaces (repo.workspace.*,
// sys.workspace.list), each a syscall through /sys/call.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

func (c *cli) forkCmd() *cobra.Command {
	var branch, label string
	cmd := &cobra.Command{
		Use:   "fork PID [--branch B] [--label L]",
		Short: "Start a second process of PID's profile on a branch of PID's workspace; print its pid",
		Long: "gsv fork PID spawns a process of PID's profile, PID its parent, in a working tree of its own\n" +
			"on branch B (default fork-<random>) of PID's workspace, made from PID's files now\n" +
			"(proc.spawn with workspace {mode: attach, workspaceId, branch}). Bring its work back with\n" +
			"gsv workspace merge ID B.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ps, err := call(c, abi.ProcList, &abi.ListArgs{})
			if err != nil {
				return err
			}
			var parent *abi.Process
			for i := range ps.Processes {
				if ps.Processes[i].Pid == args[0] {
					parent = &ps.Processes[i]
				}
			}
			if parent == nil {
				return fmt.Errorf("gsv fork: no process %s of yours", args[0])
			}
			if parent.WorkspaceID == nil || *parent.WorkspaceID == "" {
				return fmt.Errorf("gsv fork: process %s has no workspace (gsv spawn --workspace new)", args[0])
			}
			if branch == "" {
				b := make([]byte, 3)
				rand.Read(b)
				branch = "fork-" + hex.EncodeToString(b)
			}
			a := &abi.SpawnArgs{Profile: parent.Profile, ParentPid: parent.Pid, Label: label,
				Workspace: &abi.WorkspaceSpec{Mode: "attach", WorkspaceID: *parent.WorkspaceID, Branch: branch}}
			return show(c, abi.ProcSpawn, a, func(r *abi.SpawnResult) error {
				fmt.Fprintln(c.out, r.Pid)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&branch, "branch", "", "the branch (default fork-<random>)")
	cmd.Flags().StringVar(&label, "label", "", "a label for the process")
	return cmd
}

func (c *cli) workspaceCmd() *cobra.Command {
	ws := &cobra.Command{
		Use:   "workspace",
		Short: "Processes' workspaces: /workspaces/<id>, each a repository's working tree",
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List your workspaces (root: everyone's) (sys.workspace.list)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysWorkspaceList, &abi.WorkspaceListArgs{}, func(r *abi.WorkspaceListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tROOT\tBRANCH\tHEAD\tREPO\tUPDATED")
				for _, w := range r.Workspaces {
					head := "-"
					if w.HeadCommit != nil && len(*w.HeadCommit) >= 12 {
						head = (*w.HeadCommit)[:12]
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", w.WorkspaceID, w.Root, cell(w.DefaultBranch), head, cell(w.Repo),
						time.UnixMilli(w.UpdatedAt).UTC().Format(time.RFC3339))
				}
				return tw.Flush()
			})
		},
	}
	var msg string
	checkpoint := &cobra.Command{
		Use:   "checkpoint ID [-m MESSAGE]",
		Short: "Commit a workspace's files on its branch if they changed (repo.workspace.checkpoint)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.RepoWorkspaceCheckpoint, &abi.WorkspaceCheckpointArgs{WorkspaceID: args[0], Message: msg},
				func(r *abi.WorkspaceCheckpointResult) error {
					fmt.Fprintln(c.out, r.Head)
					return nil
				})
		},
	}
	checkpoint.Flags().StringVarP(&msg, "message", "m", "", "the commit message")
	merge := &cobra.Command{
		Use:   "merge ID BRANCH",
		Short: "Merge a fork's branch into workspace ID: first merge wins, a conflict is reported (repo.workspace.merge)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.RepoWorkspaceMerge, &abi.WorkspaceMergeArgs{WorkspaceID: args[0], Branch: args[1]},
				func(r *abi.WorkspaceMergeResult) error {
					if !r.Merged {
						fmt.Fprintf(c.out, "%s: nothing to merge\n", r.Branch)
						return nil
					}
					fmt.Fprintf(c.out, "%s\n", r.Head)
					for _, p := range r.Paths {
						fmt.Fprintln(c.out, p)
					}
					return nil
				})
		},
	}
	remove := &cobra.Command{
		Use:   "remove ID",
		Short: "Commit workspace ID a last time and remove its working tree; its history stays (repo.workspace.remove)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.RepoWorkspaceRemove, &abi.WorkspaceRemoveArgs{WorkspaceID: args[0]},
				func(r *abi.WorkspaceRemoveResult) error {
					fmt.Fprintf(c.out, "removed %s; its history: %s@%s %s\n", r.WorkspaceID, r.Repo, r.Branch, r.Head)
					return nil
				})
		},
	}
	show := &cobra.Command{
		Use:   "show ID",
		Short: "A workspace's directory, repository, branch and history (sys.workspace.list, repo.log)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := call(c, abi.SysWorkspaceList, &abi.WorkspaceListArgs{})
			if err != nil {
				return err
			}
			for _, w := range l.Workspaces {
				if w.WorkspaceID != args[0] {
					continue
				}
				fmt.Fprintf(c.out, "workspace: %s\ndir: %s\nrepo: %s\nbranch: %s\nroot: %s\n\n", w.WorkspaceID, w.Dir, w.Repo, w.DefaultBranch, w.Root)
				return show(c, abi.RepoLog, &abi.RepoLogArgs{Repo: w.Repo, Ref: w.DefaultBranch}, c.printLog)
			}
			return fmt.Errorf("gsv workspace show: no workspace %s of yours", args[0])
		},
	}
	ws.AddCommand(list, show, checkpoint, merge, remove)
	return ws
}
