package main

// The device commands: device list, get, update and grant
// (sys.device.*), over the kernel's registry of the devices that dial in.

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// completeDevice completes a device id (the first argument) with the
// devices the caller may use, offline ones too; rest completes the
// arguments after it.
func (c *cli) completeDevice(rest func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			if rest == nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return rest(cmd, args, toComplete)
		}
		r, err := call(c, abi.SysDeviceList, &abi.DeviceListArgs{IncludeOffline: true})
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var ids []string
		for _, d := range r.Devices {
			if strings.HasPrefix(d.DeviceID, toComplete) {
				ids = append(ids, d.DeviceID+"\t"+online(d.Online)+" "+cell(d.Platform))
			}
		}
		return ids, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeGroup completes a group name with the system's groups.
func (c *cli) completeGroup(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) != 1 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	r, err := call(c, abi.SysGroupList, &abi.GroupListArgs{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	var names []string
	for _, g := range r.Groups {
		if strings.HasPrefix(g.Name, toComplete) {
			names = append(names, g.Name)
		}
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}

// online renders a device's state as a table cell.
func online(on bool) string {
	if on {
		return "online"
	}
	return "offline"
}

// yesNo renders a flag as a table cell.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// deviceCmd is gsv device and its subcommands.
func (c *cli) deviceCmd() *cobra.Command {
	dev := &cobra.Command{
		Use:   "device",
		Short: "List, inspect, describe, share and remove the devices that dial in (sys.device.*)",
	}
	dev.AddCommand(c.deviceListCmd(), c.deviceGetCmd(), c.deviceUpdateCmd(), c.deviceGrantCmd(), c.deviceRemoveCmd())
	return dev
}

func (c *cli) deviceListCmd() *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "list [--all]",
		Short: "List the online devices you may use, --all offline ones too (sys.device.list; root: every device)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysDeviceList, &abi.DeviceListArgs{IncludeOffline: all}, func(r *abi.DeviceListResult) error {
				names := map[uint32]string{}
				if len(r.Devices) > 0 {
					if u, err := call(c, abi.SysUserList, &abi.UserListArgs{}); err == nil {
						for _, u := range u.Users {
							names[u.Uid] = u.Username
						}
					}
				}
				tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tOWNER\tONLINE\tPLATFORM\tVERSION\tLAST SEEN")
				for _, d := range r.Devices {
					owner, ok := names[d.OwnerUid]
					if !ok {
						owner = strconv.FormatUint(uint64(d.OwnerUid), 10)
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cell(d.DeviceID), cell(owner), yesNo(d.Online),
						cell(orDash(d.Platform)), cell(orDash(d.Version)), stamp(d.LastSeenAt))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "list offline devices too")
	return cmd
}

// noDevice is the error of a command on a device the daemon answered
// null for: none by that id that the caller may use (update: own).
func noDevice(id, may string) error {
	return fmt.Errorf("device %s: there is no such device you may %s", id, may)
}

func (c *cli) deviceGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:               "get ID",
		Short:             "Print a device's record as JSON (sys.device.get)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeDevice(nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysDeviceGet, &abi.DeviceGetArgs{DeviceID: args[0]}, func(r *abi.DeviceGetResult) error {
				if r.Device == nil {
					return noDevice(args[0], "use")
				}
				b, err := json.Marshal(r.Device)
				if err != nil {
					return err
				}
				return c.printJSON(b)
			})
		},
	}
}

func (c *cli) deviceUpdateCmd() *cobra.Command {
	var desc string
	cmd := &cobra.Command{
		Use:               "update ID --description TEXT",
		Short:             "Set the description of a device you own (sys.device.update)",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeDevice(nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("description") {
				return fmt.Errorf("give --description")
			}
			return show(c, abi.SysDeviceUpdate, &abi.DeviceUpdateArgs{DeviceID: args[0], Description: desc}, func(r *abi.DeviceGetResult) error {
				if r.Device == nil {
					return noDevice(args[0], "change")
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&desc, "description", "", "the device's description: one line")
	return cmd
}

func (c *cli) deviceGrantCmd() *cobra.Command {
	var revoke bool
	cmd := &cobra.Command{
		Use:   "grant ID GROUP [--revoke]",
		Short: "Let the members of GROUP use a device you own, or no longer (sys.device.grant)",
		Long: "Grant GROUP the use of device ID: its members may then list it and route calls to it.\n" +
			"Only the device's owner and root grant; --revoke takes the grant back. It prints the groups\n" +
			"the device is now granted to.",
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: c.completeDevice(c.completeGroup),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := &abi.DeviceGrantArgs{DeviceID: args[0], Group: args[1], Revoke: revoke}
			return show(c, abi.SysDeviceGrant, a, func(r *abi.DeviceGetResult) error {
				if r.Device == nil {
					return noDevice(args[0], "change")
				}
				_, err := fmt.Fprintf(c.out, "%s: groups %s\n", cell(r.Device.DeviceID), cell(orDash(strings.Join(r.Device.Groups, ","))))
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&revoke, "revoke", false, "take the grant back")
	return cmd
}

func (c *cli) deviceRemoveCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a device you own from the registry (sys.device.remove)",
		Long: "Remove device ID from the registry, with its grants; its connection, if any, ends.\n" +
			"Only the device's owner and root remove it. A user owns at most config devices.max_per_user\n" +
			"devices (16 by default): remove one to make room. Its node tokens stay: revoke them\n" +
			"(gsv token revoke) to keep the device from registering again when it dials.",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: c.completeDevice(nil),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysDeviceRemove, &abi.DeviceRemoveArgs{DeviceID: args[0]}, func(r *abi.DeviceGetResult) error {
				_, err := fmt.Fprintf(c.out, "%s: removed\n", cell(args[0]))
				return err
			})
		},
	}
}
