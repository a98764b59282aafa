package main

// The adapter.* and sys.link* commands: gsv adapter list, status, send,
// connect and disconnect; gsv link CODE, gsv link list; gsv unlink. Each
// is one syscall through /sys/call.

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// adapterCmd is gsv adapter.
func (c *cli) adapterCmd() *cobra.Command {
	adapter := &cobra.Command{
		Use:   "adapter",
		Short: "Chat adapters' accounts: list, status, send, connect, disconnect (adapter.*)",
		Long: "A bridge (gsvfs adapter KIND) speaks for one account of a chat platform. These commands\n" +
			"show the accounts you own or are linked on, and act on those you own (docs/adapters.md).",
	}
	table := func(r *abi.AdapterStatusResult) error {
		tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ADAPTER\tACCOUNT\tCONNECTED\tWANT\tLAST MESSAGE\tLEDGER\tERROR")
		for _, a := range r.Accounts {
			last := "-"
			if a.LastMessage > 0 {
				last = localTime(a.LastMessage)
			}
			var ledger []string
			for _, s := range []string{"pending", "claimed", "sent", "failed", "ambiguous"} {
				if n := a.Ledger[s]; n > 0 {
					ledger = append(ledger, fmt.Sprintf("%s=%d", s, n))
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\t%s\n", cell(a.Adapter), cell(a.AccountID), a.Connected, a.Want, last,
				strings.Join(ledger, " "), cell(a.Error))
		}
		return tw.Flush()
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the accounts of every adapter kind you may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.AdapterStatus, &abi.AdapterStatusArgs{}, table)
		},
	}
	var account string
	status := &cobra.Command{
		Use:   "status KIND [--account ID]",
		Short: "The last known state of a kind's accounts (adapter.status)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.AdapterStatus, &abi.AdapterStatusArgs{Adapter: args[0], AccountID: account}, table)
		},
	}
	status.Flags().StringVar(&account, "account", "", "one account only")
	var to, replyTo, sendAccount string
	send := &cobra.Command{
		Use:   "send KIND --to KIND:ID TEXT... [--account ID]",
		Short: "Send text to a chat through an account's bridge, at most once (adapter.send)",
		Long: "Send text to a chat: --to names its surface as kind:id (dm:<chat>, group:<id>, channel:<id>),\n" +
			"or an id alone for a DM. The command waits up to 30 s for the bridge to report the message sent.",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to == "" {
				return fmt.Errorf("--to: name the chat (dm:<id>, group:<id>, channel:<id>)")
			}
			sk, sid, ok := strings.Cut(to, ":")
			if !ok {
				sk, sid = "dm", to
			}
			a := &abi.AdapterSendArgs{Adapter: args[0], AccountID: sendAccount, Surface: abi.AdapterSurface{Kind: sk, ID: sid},
				Text: strings.Join(args[1:], " "), ReplyToID: replyTo}
			return show(c, abi.AdapterSend, a, func(r *abi.AdapterSendResult) error {
				fmt.Fprintf(c.out, "%s %s", r.State, r.DeliveryID)
				if r.MessageID != "" {
					fmt.Fprintf(c.out, " %s", r.MessageID)
				}
				fmt.Fprintln(c.out)
				if !r.OK {
					return fmt.Errorf("adapter.send: %s: %s", r.State, r.Error)
				}
				return nil
			})
		},
	}
	send.Flags().StringVar(&sendAccount, "account", "default", "the account to send through")
	send.Flags().StringVar(&to, "to", "", "the chat: kind:id, or a DM's id")
	send.Flags().StringVar(&replyTo, "reply-to", "", "the platform id of a message to reply to")
	want := func(use string, d abi.Call[abi.AdapterAccountArgs, *abi.AdapterAccountResult]) *cobra.Command {
		var account string
		cmd := &cobra.Command{
			Use:   use + " KIND [--account ID]",
			Short: fmt.Sprintf("Ask an account's bridge to %s (%s)", use, d.Name),
			Args:  cobra.ExactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return show(c, d, &abi.AdapterAccountArgs{Adapter: args[0], AccountID: account}, func(r *abi.AdapterAccountResult) error {
					_, err := fmt.Fprintf(c.out, "%s/%s: %s (%s)\n", r.Adapter, r.AccountID, r.Want, r.Message)
					return err
				})
			},
		}
		cmd.Flags().StringVar(&account, "account", "default", "the account")
		return cmd
	}
	adapter.AddCommand(list, status, send, want("connect", abi.AdapterConnect), want("disconnect", abi.AdapterDisconnect))
	return adapter
}

// linkCmd is gsv link: CODE consumes a link code; list lists your links.
func (c *cli) linkCmd() *cobra.Command {
	link := &cobra.Command{
		Use:   "link CODE | link list",
		Short: "Link a chat account to you with the code it was given (sys.link.consume); list your links",
		Long: "DM a bridge's bot: it answers with a code such as K7QF-29TD. `gsv link K7QF-29TD` links that\n" +
			"chat account to you, and its messages reach your init process. A code works once, for 10\n" +
			"minutes; after 5 wrong codes in 10 minutes every code is refused until the 10 minutes pass.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysLinkConsume, &abi.LinkConsumeArgs{Code: args[0]}, func(r *abi.LinkResult) error {
				if r.Link == nil {
					return fmt.Errorf("sys.link.consume: not linked")
				}
				_, err := fmt.Fprintf(c.out, "linked %s/%s %s to uid %d\n", r.Link.Adapter, r.Link.AccountID, r.Link.ActorID, r.Link.Uid)
				return err
			})
		},
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List your identity links, newest first (sys.link.list)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysLinkList, &abi.LinkListArgs{}, func(r *abi.LinkListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ADAPTER\tACCOUNT\tACTOR\tUID\tLINKED")
				for _, l := range r.Links {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", cell(l.Adapter), cell(l.AccountID), cell(l.ActorID), l.Uid, localTime(l.CreatedAt))
				}
				return tw.Flush()
			})
		},
	}
	link.AddCommand(list)
	return link
}

// unlinkCmd is gsv unlink.
func (c *cli) unlinkCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "unlink ADAPTER ACCOUNT ACTOR",
		Short: "Remove one of your identity links (sys.unlink)",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysUnlink, &abi.UnlinkArgs{Adapter: args[0], AccountID: args[1], ActorID: args[2]}, func(r *abi.UnlinkResult) error {
				if !r.Removed {
					return fmt.Errorf("sys.unlink: %s/%s %s: no such link of yours", args[0], args[1], args[2])
				}
				_, err := fmt.Fprintln(c.out, "unlinked")
				return err
			})
		},
	}
}
