package main

// The pkg.* commands (gsv pkg list, add, show, review approve, install,
// remove, checkout, sync, remote, public): each one syscall through
// /sys/call.

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

func (c *cli) pkgCmd() *cobra.Command {
	pkg := &cobra.Command{
		Use:   "pkg",
		Short: "Packages: skills, profiles, commands, schedules and MCP servers installed from repositories (pkg.*)",
		Long: "A package is a repository (or a subdirectory of one) with a gsv-package.json manifest.\n" +
			"Add it, review what it adds (gsv pkg show), approve and install it; remove disables it.\n" +
			"Its files are under /pkg/<scope>/<name>/ (docs/packages.md).",
	}
	var enabled, disabled bool
	list := &cobra.Command{
		Use:   "list [NAME] [--enabled|--disabled]",
		Short: "Builtin and added packages, enabled or not (pkg.list)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.PkgListArgs{}
			if len(args) == 1 {
				a.Name = args[0]
			}
			if enabled || disabled {
				a.Enabled = &enabled
			}
			return show(c, abi.PkgList, a, func(r *abi.PkgListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "PACKAGE\tVERSION\tSTATE\tREVIEW\tSOURCE")
				for _, p := range r.Packages {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cell(p.ID), cell(p.Version), pkgState(p), pkgReview(p.Review), cell(pkgSource(p)))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&enabled, "enabled", false, "only enabled packages")
	list.Flags().BoolVar(&disabled, "disabled", false, "only disabled packages")
	var ref, subdir string
	var enable, global bool
	add := &cobra.Command{
		Use:   "add URL|OWNER/REPO [--ref REF] [--subdir DIR] [--enable] [--global]",
		Short: "Add a package from a repository or a git URL; disabled and review-required outside the builtin source (pkg.add)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.PkgAddArgs{Ref: ref, Subdir: subdir, Enable: enable, Global: global}
			if strings.Contains(args[0], "://") {
				a.RemoteURL = args[0]
			} else {
				a.Repo = args[0]
			}
			return show(c, abi.PkgAdd, a, func(r *abi.PkgAddResult) error {
				return c.printPkg(r.Package, r.Changed)
			})
		},
	}
	add.Flags().StringVar(&ref, "ref", "", "branch, tag or commit (default main)")
	add.Flags().StringVar(&subdir, "subdir", "", "the package's directory in the repository (default .)")
	add.Flags().BoolVar(&enable, "enable", false, "install it at once when it needs no review")
	add.Flags().BoolVar(&global, "global", false, "for every user (root only)")
	showc := &cobra.Command{
		Use:   "show PACKAGE",
		Short: "A package's manifest and review: exactly what enabling it adds, and as whom each part runs (pkg.show)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.PkgShow, &abi.PkgIDArgs{PackageID: args[0]}, func(r *abi.PkgShowResult) error {
				p := r.Package
				fmt.Fprintf(c.out, "%s %s: %s\n", cell(p.ID), cell(p.Version), cell(p.Desc))
				fmt.Fprintf(c.out, "source: %s at %s\nstate: %s\nreview: %s\n", cell(pkgSource(p)), p.Commit, pkgState(p), pkgReview(p.Review))
				if len(r.NewPowers) > 0 {
					fmt.Fprintf(c.out, "new since the approval: %s\n", cell(strings.Join(r.NewPowers, "; ")))
				}
				fmt.Fprintln(c.out, "enabling it adds:")
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				for _, a := range r.Adds {
					fmt.Fprintf(tw, "  %s\t%s\t%s\truns as %s\n", a.Kind, cell(a.Name), cell(a.Source), cell(a.RunsAs))
				}
				return tw.Flush()
			})
		},
	}
	review := &cobra.Command{Use: "review", Short: "A package's review (pkg.review.*)"}
	review.AddCommand(&cobra.Command{
		Use:   "approve PACKAGE",
		Short: "Approve a package at its current commit (pkg.review.approve)",
		Args:  cobra.ExactArgs(1),
		RunE:  c.pkgChange(abi.PkgReviewApprove),
	})
	install := &cobra.Command{
		Use:   "install PACKAGE",
		Short: "Enable a package: its parts appear, all or none (pkg.install)",
		Args:  cobra.ExactArgs(1),
		RunE:  c.pkgChange(abi.PkgInstall),
	}
	remove := &cobra.Command{
		Use:   "remove PACKAGE",
		Short: "Disable a package: its parts go, the package and its review stay (pkg.remove)",
		Args:  cobra.ExactArgs(1),
		RunE:  c.pkgChange(abi.PkgRemove),
	}
	var coRef string
	checkout := &cobra.Command{
		Use:   "checkout PACKAGE --ref REF",
		Short: "Re-resolve a package at a new ref, keeping its state and review (pkg.checkout)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.PkgCheckout, &abi.PkgCheckoutArgs{PackageID: args[0], Ref: coRef}, func(r *abi.PkgChangeResult) error {
				return c.printPkg(r.Package, r.Changed)
			})
		},
	}
	checkout.Flags().StringVar(&coRef, "ref", "", "branch, tag or commit")
	checkout.MarkFlagRequired("ref")
	sync := &cobra.Command{
		Use:   "sync",
		Short: "Rebuild the builtin packages from the builtin source (root; pkg.sync)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.PkgSync, &struct{}{}, func(r *abi.PkgSyncResult) error {
				for _, p := range r.Packages {
					fmt.Fprintf(c.out, "%s %s\n", cell(p.ID), pkgState(p))
				}
				return nil
			})
		},
	}
	pkg.AddCommand(list, add, showc, review, install, remove, checkout, sync, c.pkgRemoteCmd(), c.pkgPublicCmd())
	return pkg
}

// pkgChange is a command that makes one of the PACKAGE calls.
func (c *cli) pkgChange(d abi.Call[abi.PkgIDArgs, *abi.PkgChangeResult]) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return show(c, d, &abi.PkgIDArgs{PackageID: args[0]}, func(r *abi.PkgChangeResult) error {
			return c.printPkg(r.Package, r.Changed)
		})
	}
}

// printPkg prints a package in one line, and whether it changed.
func (c *cli) printPkg(p abi.PkgSummary, changed bool) error {
	what := "unchanged"
	if changed {
		what = "changed"
	}
	_, err := fmt.Fprintf(c.out, "%s %s %s (review %s; %s)\n", cell(p.ID), shortHash(p.Commit), pkgState(p), pkgReview(p.Review), what)
	return err
}

// shortHash is a commit's first 12 digits.
func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

// pkgState is enabled/disabled, and held when enabled but waiting for a
// review.
func pkgState(p abi.PkgSummary) string {
	switch {
	case p.Active:
		return "enabled"
	case p.Enabled:
		return "enabled,held-for-review"
	}
	return "disabled"
}

// pkgReview says a review state in a word.
func pkgReview(r abi.PkgReview) string {
	switch {
	case !r.Required:
		return "not-required"
	case r.Approved:
		return "approved"
	case r.ApprovedAt != 0:
		return "required-again"
	}
	return "required"
}

// pkgSource is where a package comes from.
func pkgSource(p abi.PkgSummary) string {
	src := p.Repo
	if p.RemoteURL != "" {
		src = p.RemoteURL
	}
	if p.Subdir != "." && p.Subdir != "" {
		src += "//" + p.Subdir
	}
	return src + "@" + p.Ref
}

// pkgRemoteCmd is gsv pkg remote list|add|remove.
func (c *cli) pkgRemoteCmd() *cobra.Command {
	remote := &cobra.Command{Use: "remote", Short: "Your package catalogs (pkg.remote.*)"}
	printRemotes := func(rs []abi.PkgRemote) error {
		for _, r := range rs {
			fmt.Fprintf(c.out, "%s\t%s\n", cell(r.Name), cell(r.BaseURL))
		}
		return nil
	}
	remote.AddCommand(&cobra.Command{
		Use:   "list",
		Short: "Your catalog remotes (pkg.remote.list)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.PkgRemoteList, &struct{}{}, func(r *abi.PkgRemoteListResult) error { return printRemotes(r.Remotes) })
		},
	}, &cobra.Command{
		Use:   "add NAME URL",
		Short: "Add a catalog remote: a name of letters, digits and dashes, an http(s) URL (pkg.remote.add)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.PkgRemoteAdd, &abi.PkgRemoteAddArgs{Name: args[0], BaseURL: args[1]}, func(r *abi.PkgRemoteAddResult) error {
				return printRemotes(r.Remotes)
			})
		},
	}, &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a catalog remote (pkg.remote.remove)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.PkgRemoteRemove, &abi.PkgRemoteRemoveArgs{Name: args[0]}, func(r *abi.PkgRemoteRemoveResult) error {
				if !r.Removed {
					return fmt.Errorf("no remote %s", args[0])
				}
				return printRemotes(r.Remotes)
			})
		},
	})
	return remote
}

// pkgPublicCmd is gsv pkg public list|set.
func (c *cli) pkgPublicCmd() *cobra.Command {
	public := &cobra.Command{Use: "public", Short: "Public packages and catalogs (pkg.public.*)"}
	public.AddCommand(&cobra.Command{
		Use:   "list [REMOTE|URL]",
		Short: "This server's public packages, or a remote's catalog (pkg.public.list)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.PkgPublicListArgs{}
			if len(args) == 1 {
				a.Remote = args[0]
			}
			return show(c, abi.PkgPublicList, a, func(r *abi.PkgPublicListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tVERSION\tSOURCE\tDESCRIPTION")
				for _, p := range r.Packages {
					src := p.Repo
					if p.RemoteURL != "" {
						src = p.RemoteURL
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cell(p.Name), cell(p.Version), cell(src), cell(p.Description))
				}
				return tw.Flush()
			})
		},
	}, &cobra.Command{
		Use:   "set PACKAGE true|false",
		Short: "List a package in this server's catalog, or not (pkg.public.set)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] != "true" && args[1] != "false" {
				return fmt.Errorf("want true or false, not %q", args[1])
			}
			return show(c, abi.PkgPublicSet, &abi.PkgPublicSetArgs{PackageID: args[0], Public: args[1] == "true"}, func(r *abi.PkgPublicSetResult) error {
				_, err := fmt.Fprintf(c.out, "%s public=%v\n", cell(r.Repo), r.Public)
				return err
			})
		},
	})
	return public
}
