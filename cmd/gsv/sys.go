package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// configCmd is gsv config: sys.config.get, sys.config.set and
// sys.config.unset.
func (c *cli) configCmd() *cobra.Command {
	config := &cobra.Command{Use: "config", Short: "Read and set configuration"}
	config.AddCommand(&cobra.Command{
		Use:   "get [KEY]",
		Short: "Print the visible config entries (under KEY) as key=value",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.ConfigGetArgs{}
			if len(args) == 1 {
				a.Key = args[0]
			}
			return show(c, abi.SysConfigGet, a, func(r *abi.ConfigGetResult) error {
				if len(args) == 1 && len(r.Entries) == 0 {
					return fmt.Errorf("config key %s: not found", args[0])
				}
				for _, e := range r.Entries {
					fmt.Fprintf(c.out, "%s=%s\n", e.Key, e.Value)
				}
				return nil
			})
		},
	})
	config.AddCommand(&cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a config key",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			v, err := json.Marshal(args[1])
			if err != nil {
				return err
			}
			return show(c, abi.SysConfigSet, &abi.ConfigSetArgs{Key: args[0], Value: v},
				func(*abi.ConfigSetResult) error { return nil })
		},
	})
	config.AddCommand(&cobra.Command{
		Use:   "unset KEY",
		Short: "Remove a config key (its readers fall back to the default)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysConfigUnset, &abi.ConfigUnsetArgs{Key: args[0]},
				func(*abi.ConfigSetResult) error { return nil })
		},
	})
	return config
}

// tokenCmd is gsv token: sys.token.create, list and revoke.
func (c *cli) tokenCmd() *cobra.Command {
	token := &cobra.Command{Use: "token", Short: "Create, list and revoke tokens"}
	var kind, label, reason, procCap, device, adapter string
	var tokUID int
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token; its secret is printed once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.TokenCreateArgs{Kind: kind}
			if label != "" {
				a.Label = &label
			}
			if device != "" {
				a.AllowedDeviceID = &device
			}
			if adapter != "" {
				a.AllowedAdapter = &adapter
			}
			if tokUID >= 0 {
				u := uint32(tokUID)
				a.Uid = &u
			}
			if procCap != "" {
				a.Process = &abi.ProcessCap{}
				dec := json.NewDecoder(strings.NewReader(procCap))
				dec.DisallowUnknownFields()
				if err := dec.Decode(a.Process); err != nil {
					return fmt.Errorf("--process: %v", err)
				}
			}
			return show(c, abi.SysTokenCreate, a, func(r *abi.TokenCreateResult) error {
				if r.Token == nil {
					return fmt.Errorf("sys.token.create: no token in the result")
				}
				fmt.Fprintf(c.out, "%s\n", r.Token.Token)
				fmt.Fprintf(cmd.ErrOrStderr(), "token id %s: the secret above is shown only once\n", r.Token.TokenID)
				return nil
			})
		},
	}
	create.Flags().StringVar(&kind, "kind", "user", "user, service or node")
	create.Flags().StringVar(&label, "label", "", "a label for the token")
	create.Flags().StringVar(&device, "device", "", "with --kind node: the id of the device the token binds to (required)")
	create.Flags().StringVar(&adapter, "adapter", "", "with --kind service: the chat adapter kind the token binds to (its holder makes only that bridge's calls)")
	create.Flags().IntVar(&tokUID, "uid", -1, "the uid to create it for (root only)")
	create.Flags().StringVar(&procCap, "process", "", `narrow the process capability of the token's holder: JSON, e.g. '{"networks":["none"],"mounts":[{"prefix":"~","mode":"ro"}]}'`)
	list := &cobra.Command{
		Use:   "list",
		Short: "List your tokens (root: everyone's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysTokenList, &abi.TokenListArgs{}, func(r *abi.TokenListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tPREFIX\tUID\tKIND\tLABEL\tSTATE")
				for _, t := range r.Tokens {
					state, l := "active", ""
					if t.RevokedAt != nil {
						state = "revoked"
					}
					if t.Label != nil {
						l = *t.Label
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", t.TokenID, t.TokenPrefix, t.Uid, t.Kind, l, state)
				}
				return tw.Flush()
			})
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke TOKEN-ID",
		Short: "Revoke a token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.TokenRevokeArgs{TokenID: args[0]}
			if reason != "" {
				a.Reason = &reason
			}
			return show(c, abi.SysTokenRevoke, a, func(r *abi.TokenRevokeResult) error {
				if !r.Revoked {
					return fmt.Errorf("token %s: not found or already revoked", args[0])
				}
				return nil
			})
		},
	}
	revoke.Flags().StringVar(&reason, "reason", "", "why")
	token.AddCommand(create, list, revoke)
	return token
}

// userCmd is gsv user: sys.user.add and sys.user.list.
func (c *cli) userCmd() *cobra.Command {
	userCmd := &cobra.Command{Use: "user", Short: "Add and list users"}
	var hostUID, uid int
	var gecos string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user (root only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.UserAddArgs{Username: args[0], Gecos: gecos}
			if hostUID >= 0 {
				a.HostUID = &hostUID
			}
			if uid >= 0 {
				a.Uid = &uid
			}
			return show(c, abi.SysUserAdd, a, func(u *abi.User) error {
				_, err := fmt.Fprintf(c.out, "%s uid=%d home=%s\n", args[0], u.Uid, u.Home)
				return err
			})
		},
	}
	add.Flags().IntVar(&hostUID, "host-uid", -1, "the host uid that acts as this user over FUSE and the 9P socket")
	add.Flags().IntVar(&uid, "uid", -1, "the uid (default: the next free from 1000)")
	add.Flags().StringVar(&gecos, "gecos", "", "the user's full name")
	ulist := &cobra.Command{
		Use:   "list",
		Short: "List users",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysUserList, &abi.UserListArgs{}, func(r *abi.UserListResult) error {
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "USER\tUID\tGID\tHOME\tHOST-UID")
				for _, u := range r.Users {
					h := "-"
					if u.HostUID != nil {
						h = fmt.Sprint(*u.HostUID)
					}
					fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", u.Username, u.Uid, u.Gid, u.Home, h)
				}
				return tw.Flush()
			})
		},
	}
	userCmd.AddCommand(add, ulist)
	return userCmd
}
