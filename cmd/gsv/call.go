package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"9fans.net/go/plan9"
	"github.com/spf13/cobra"
)

// callCmd is gsv call: any syscall by name, its result printed as JSON.
// gsv call NAME --help prints NAME's description and its args schema, as
// the daemon's /sys/syscalls/NAME shows them to the caller.
func (c *cli) callCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "call NAME [ARGS-JSON]",
		Short: "Make any syscall and print its result as JSON",
		Long: `Make any syscall and print its result as JSON.

gsv call NAME --help prints what the daemon says of NAME: its description
and the JSON Schema of its args (/sys/syscalls/NAME/doc and schema, which
also has its result's).`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := "{}"
			if len(args) == 2 {
				a = args[1]
			}
			if !json.Valid([]byte(a)) {
				return fmt.Errorf("args are not valid JSON: %s", a)
			}
			data, err := c.call(args[0], json.RawMessage(a))
			if err != nil {
				return err
			}
			return c.printJSON(data)
		},
	}
	defaultHelp := cmd.HelpFunc()
	cmd.SetHelpFunc(func(cmd *cobra.Command, args []string) {
		names := cmd.Flags().Args()
		if cmd.Name() != "call" || len(names) == 0 {
			defaultHelp(cmd, args)
			return
		}
		if err := c.describe(cmd, names[0]); err != nil {
			defaultHelp(cmd, args)
			fmt.Fprintf(cmd.ErrOrStderr(), "\ngsv: %s: %v\n", names[0], err)
		}
	})
	return cmd
}

// describe prints the syscall name's doc, how to call it and its args
// schema, read from /sys/syscalls/name.
func (c *cli) describe(cmd *cobra.Command, name string) error {
	if name == "" || strings.ContainsAny(name, "/") || name == "." || name == ".." {
		return fmt.Errorf("not a syscall name")
	}
	fsys, err := mount()
	if err != nil {
		return err
	}
	defer fsys.Close()
	read := func(file string) ([]byte, error) {
		fid, err := fsys.Open("/sys/syscalls/"+name+"/"+file, plan9.OREAD)
		if err != nil {
			return nil, err
		}
		defer fid.Close()
		return io.ReadAll(fid)
	}
	doc, err := read("doc")
	if err != nil {
		return fmt.Errorf("not in /sys/syscalls (no such syscall, or not one you may make): %w", err)
	}
	raw, err := read("schema")
	if err != nil {
		return fmt.Errorf("no schema: %w", err)
	}
	var s struct {
		Args json.RawMessage `json:"args"`
	}
	if err := json.Unmarshal(raw, &s); err != nil || s.Args == nil {
		return fmt.Errorf("bad schema %q: %v", raw, err)
	}
	var args bytes.Buffer
	if err := json.Indent(&args, s.Args, "", "  "); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n\nUsage:\n  gsv call %s [ARGS-JSON]\n\nArgs (JSON Schema; the result's is in /sys/syscalls/%s/schema):\n%s\n",
		name, strings.TrimSpace(string(doc)), name, name, args.Bytes())
	return err
}
