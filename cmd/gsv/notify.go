package main

// The notification.* commands: gsv notify list, create, read and
// dismiss. Each is one syscall through /sys/call.

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

func (c *cli) notifyCmd() *cobra.Command {
	notify := &cobra.Command{
		Use:   "notify",
		Short: "List, create, read and dismiss your notifications (notification.*)",
		Long: "Notifications are per user: you see and change only your own. An unread one expires after\n" +
			"30 days (or its --ttl), a read one 7 days after it is read, a dismissed one 3 days after.",
	}

	var all bool
	list := &cobra.Command{
		Use:   "list [--all] [--json]",
		Short: "List your notifications, newest first (--all: dismissed ones too)",
		Long: "List your live notifications, newest first, at most 500. STATE is new, read or dismissed;\n" +
			"CREATED is local time.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			limit := 500
			return show(c, abi.NotificationList, &abi.NotificationListArgs{IncludeDismissed: &all, Limit: &limit}, func(r *abi.NotificationListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tLEVEL\tSTATE\tCREATED\tSOURCE\tTITLE")
				for _, n := range r.Notifications {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(n.NotificationID), cell(n.Level), state(&n),
						localTime(n.CreatedAt), source(n.Source), cell(n.Title))
				}
				return tw.Flush()
			})
		},
	}
	list.Flags().BoolVar(&all, "all", false, "include dismissed notifications")

	var body, level string
	var ttl time.Duration
	create := &cobra.Command{
		Use:   "create TITLE... [--body B] [--level info|success|warning|error] [--ttl DUR]",
		Short: "Create a notification for yourself and print its id (notification.create)",
		Long: "Create a notification for yourself and print its id. TITLE is the arguments joined by spaces.\n" +
			"  gsv notify create 'build finished' --body 'all green' --level success",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.NotificationCreateArgs{Title: strings.Join(args, " "), Body: body, Level: level}
			if cmd.Flags().Changed("ttl") {
				ms := ttl.Milliseconds()
				a.TtlMs = &ms
			}
			return show(c, abi.NotificationCreate, a, func(r *abi.NotificationCreateResult) error {
				_, err := fmt.Fprintln(c.out, r.Notification.NotificationID)
				return err
			})
		},
	}
	create.Flags().StringVar(&body, "body", "", "the notification's body")
	create.Flags().StringVar(&level, "level", "", "info (default), success, warning or error")
	create.Flags().DurationVar(&ttl, "ttl", 0, "expire an unread notification after DUR (1s to 90 days; default 30 days)")

	byID := func(use, short string, d abi.Call[abi.NotificationIDArgs, *abi.NotificationResult]) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ID",
			Short: fmt.Sprintf(short, d.Name),
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return show(c, d, &abi.NotificationIDArgs{NotificationID: args[0]}, func(r *abi.NotificationResult) error {
					if r.Notification == nil {
						return fmt.Errorf("%s: %s: no such notification (or it expired)", d.Name, args[0])
					}
					_, err := fmt.Fprintf(c.out, "%s %s\n", r.Notification.NotificationID, state(r.Notification))
					return err
				})
			},
		}
	}
	notify.AddCommand(list, create,
		byID("read", "Mark a notification read; it expires 7 days later (%s)", abi.NotificationMarkRead),
		byID("dismiss", "Dismiss a notification; it expires 3 days later (%s)", abi.NotificationDismiss))
	return notify
}

// state is a notification's STATE: dismissed, read or new.
func state(n *abi.Notification) string {
	switch {
	case n.DismissedAt != nil:
		return "dismissed"
	case n.ReadAt != nil:
		return "read"
	}
	return "new"
}

// source renders a notification's source: user, or process:<pid>.
func source(s abi.NotificationSource) string {
	if s.Kind == "process" {
		return "process:" + cell(s.ProcessID)
	}
	return cell(s.Kind)
}
