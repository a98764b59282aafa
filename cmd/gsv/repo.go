package main

// The repo.* commands (gsv repo list, create, log) and the undoable home
// (gsv home log, diff, restore): each a syscall, or a few, through
// /sys/call.

import (
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

func (c *cli) repoCmd() *cobra.Command {
	repo := &cobra.Command{
		Use:   "repo",
		Short: "Git repositories at /src/repos/<owner>/<name> (repo.*)",
		Long: "Repositories are clonable over git's smart HTTP at http://USER:TOKEN@HOST/git/OWNER/NAME on\n" +
			"the daemon's --http listener; their refs' trees are read-only files under /src/repos.",
	}
	list := &cobra.Command{
		Use:   "list [OWNER]",
		Short: "List the repositories you may read (repo.list)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.RepoListArgs{}
			if len(args) == 1 {
				a.Owner = args[0]
			}
			return show(c, abi.RepoList, a, func(r *abi.RepoListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "REPO\tKIND\tACCESS\tDESCRIPTION")
				for _, x := range r.Repos {
					acc := "read"
					if x.Writable {
						acc = "write"
					}
					if x.Public {
						acc += ",public"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(x.Repo), x.Kind, acc, cell(x.Description))
				}
				return tw.Flush()
			})
		},
	}
	var public bool
	var desc string
	create := &cobra.Command{
		Use:   "create NAME [--public] [--description D]",
		Short: "Make a repository of yours with an empty first commit on main (repo.create)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.RepoCreate, &abi.RepoCreateArgs{Repo: args[0], Public: public, Description: desc}, func(r *abi.RepoCreateResult) error {
				fmt.Fprintln(c.out, r.Repo)
				return nil
			})
		},
	}
	create.Flags().BoolVar(&public, "public", false, "every user may read it")
	create.Flags().StringVar(&desc, "description", "", "a one-line description")
	var n int
	logc := &cobra.Command{
		Use:   "log REPO [REF] [-n N]",
		Short: "A ref's first-parent history (repo.log)",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.RepoLogArgs{Repo: args[0], Limit: &n}
			if len(args) == 2 {
				a.Ref = args[1]
			}
			return show(c, abi.RepoLog, a, c.printLog)
		},
	}
	logc.Flags().IntVarP(&n, "number", "n", 30, "at most N commits (1-100)")
	repo.AddCommand(list, create, logc)
	return repo
}

// printLog prints a log one commit a line: hash, time, author, subject.
func (c *cli) printLog(r *abi.RepoLogResult) error {
	for _, e := range r.Entries {
		subject, _, _ := strings.Cut(e.Message, "\n")
		fmt.Fprintf(c.out, "%s %s %s %s\n", e.Hash[:12], time.Unix(e.AuthorTime, 0).Format("2006-01-02 15:04:05"), cell(e.Author), cell(subject))
	}
	return nil
}

// homeRepo is the caller's home repository and home directory.
func (c *cli) homeRepo() (repo, home string, err error) {
	who, err := call(c, abi.SysWhoami, &abi.WhoamiArgs{})
	if err != nil {
		return "", "", err
	}
	return who.Process.Username + "/home", who.Process.Home, nil
}

// homePath checks a path given relative to the home.
func homePath(p string) (string, error) {
	p = strings.TrimPrefix(p, "./")
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains("/"+p+"/", "/../") {
		return "", errors.New("give a path relative to your home, without ..")
	}
	return strings.TrimSuffix(p, "/"), nil
}

// splitDashDash reads REV [-- PATH].
func splitDashDash(cmd *cobra.Command, args []string) (rev, path string, err error) {
	at := cmd.ArgsLenAtDash()
	switch {
	case at == 1 && len(args) == 2:
		p, err := homePath(args[1])
		return args[0], p, err
	case at < 0 && len(args) == 1:
		return args[0], "", nil
	}
	return "", "", errors.New("usage: REV [-- PATH]")
}

func (c *cli) homeCmd() *cobra.Command {
	home := &cobra.Command{
		Use:   "home",
		Short: "Your home's history: every change, whoever made it (the repository USER/home)",
		Long: "Every change to your home, by you or any of your agents, is committed to the repository\n" +
			"USER/home within seconds (one commit per batch). Files over 1 MiB are recorded, not stored.",
	}
	var n int
	logc := &cobra.Command{
		Use:   "log [-n N]",
		Short: "Your home's commits, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			repo, _, err := c.homeRepo()
			if err != nil {
				return err
			}
			return show(c, abi.RepoLog, &abi.RepoLogArgs{Repo: repo, Limit: &n}, c.printLog)
		},
	}
	logc.Flags().IntVarP(&n, "number", "n", 30, "at most N commits (1-100)")
	diff := &cobra.Command{
		Use:   "diff REV [-- PATH]",
		Short: "What changed in your home since REV (HEAD~3, a hash), of PATH or of all",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rev, path, err := splitDashDash(cmd, args)
			if err != nil {
				return err
			}
			repo, _, err := c.homeRepo()
			if err != nil {
				return err
			}
			return show(c, abi.RepoCompare, &abi.RepoCompareArgs{Repo: repo, Base: rev, Head: "main", Path: path}, func(r *abi.RepoCompareResult) error {
				printDiff(c, r.Files)
				return nil
			})
		},
	}
	restore := &cobra.Command{
		Use:   "restore REV -- PATH",
		Short: "Put PATH back as it was at REV (a file that was not there then is removed)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rev, path, err := splitDashDash(cmd, args)
			if err != nil || path == "" {
				return errors.New("usage: gsv home restore REV -- PATH")
			}
			repo, dir, err := c.homeRepo()
			if err != nil {
				return err
			}
			target := dir + "/" + path
			old, err := call(c, abi.RepoRead, &abi.RepoReadArgs{Repo: repo, Ref: rev, Path: path})
			var ae *abi.Error
			if errors.As(err, &ae) && ae.Kind == abi.NotExist && strings.Contains(err.Error(), "no such file") {
				res, err := call(c, abi.FsDelete, &abi.FSDeleteArgs{Path: target})
				if err == nil && !res.OK {
					err = errors.New(res.Error)
				}
				if err == nil {
					fmt.Fprintf(c.out, "removed %s (not there at %s)\n", target, rev)
				}
				return err
			}
			if err != nil {
				return err
			}
			if old.Kind != "file" || old.Content == nil {
				return fmt.Errorf("%s at %s is not a text file: restore it with git over /git/%s", path, rev, repo)
			}
			res, err := call(c, abi.FsWrite, &abi.FSWriteArgs{Path: target, Content: *old.Content})
			if err == nil && !res.OK {
				err = errors.New(res.Error)
			}
			if err == nil {
				fmt.Fprintf(c.out, "restored %s as of %s\n", target, rev)
			}
			return err
		},
	}
	home.AddCommand(logc, diff, restore)
	return home
}

// printDiff prints files' hunks as a unified diff.
func printDiff(c *cli, files []abi.RepoDiffFile) {
	for _, f := range files {
		from, to := "a/"+f.Path, "b/"+f.Path
		switch f.Status {
		case "added":
			from = "/dev/null"
		case "deleted":
			to = "/dev/null"
		}
		fmt.Fprintf(c.out, "--- %s\n+++ %s\n", from, to)
		for _, h := range f.Hunks {
			if len(h.Lines) == 1 && h.Lines[0].Tag == "binary" {
				fmt.Fprintln(c.out, h.Lines[0].Content)
				continue
			}
			fmt.Fprintf(c.out, "@@ -%d,%d +%d,%d @@\n", h.OldStart, h.OldCount, h.NewStart, h.NewCount)
			for _, l := range h.Lines {
				mark := " "
				switch l.Tag {
				case "add":
					mark = "+"
				case "delete":
					mark = "-"
				}
				fmt.Fprintln(c.out, mark+l.Content)
			}
		}
	}
}
