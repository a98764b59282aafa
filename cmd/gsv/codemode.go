package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// codemodeCmd is gsv codemode: run a JavaScript block with codemode.run.
func (c *cli) codemodeCmd() *cobra.Command {
	var (
		code, target, cwd, pid, argsJSON string
		kv                               []string
		timeout                          time.Duration
	)
	cmd := &cobra.Command{
		Use:   "codemode [-e CODE | FILE] [flags] [-- ARGV... [--arg K=V]...]",
		Short: "Run a JavaScript block as a process (codemode.run); print its result",
		Long: "Run a JavaScript block, the body of an async function (top-level await, explicit\n" +
			"return), with shell(input, {target, cwd, sessionId}) and fs.read/write/edit/delete/search\n" +
			"as syscalls made as the process (default: your init). FILE is read here; - is stdin.\n\n" +
			"Arguments after -- are the block's argv; --arg K=V (before or after --) and --args-json\n" +
			"set its args. Without --json it prints the result (a string as it is, anything else as\n" +
			"JSON) and the block's console lines on stderr; with --json the whole envelope. A failed\n" +
			"run exits 1.",
		RunE: func(cmd *cobra.Command, args []string) error {
			pos, argv := args, []string(nil)
			if n := cmd.ArgsLenAtDash(); n >= 0 {
				pos, argv = args[:n], args[n:]
			}
			// --arg K=V after -- is still an arg, as gsv codemode f.js -- a b --arg k=v.
			var rest []string
			for i := 0; i < len(argv); i++ {
				switch a := argv[i]; {
				case a == "--arg" && i+1 < len(argv):
					kv = append(kv, argv[i+1])
					i++
				case strings.HasPrefix(a, "--arg="):
					kv = append(kv, strings.TrimPrefix(a, "--arg="))
				default:
					rest = append(rest, a)
				}
			}
			argv = rest
			switch {
			case cmd.Flags().Changed("eval") && len(pos) > 0:
				return errors.New("codemode: give -e CODE or FILE, not both")
			case !cmd.Flags().Changed("eval") && len(pos) != 1:
				return errors.New("codemode: give -e CODE or one FILE")
			case len(pos) == 1:
				var b []byte
				var err error
				if pos[0] == "-" {
					b, err = readAllStdin()
				} else {
					b, err = os.ReadFile(pos[0])
				}
				if err != nil {
					return err
				}
				code = string(b)
			}
			a := &abi.CodeModeRunArgs{Pid: pid, Code: code, Argv: argv, Target: target, Cwd: cwd, TimeoutMs: timeout.Milliseconds()}
			switch {
			case argsJSON != "" && len(kv) > 0:
				return errors.New("codemode: give --arg or --args-json, not both")
			case argsJSON != "":
				if !json.Valid([]byte(argsJSON)) {
					return fmt.Errorf("codemode: --args-json is not JSON: %s", argsJSON)
				}
				a.Args = json.RawMessage(argsJSON)
			case len(kv) > 0:
				m := map[string]string{}
				for _, p := range kv {
					k, v, ok := strings.Cut(p, "=")
					if !ok || k == "" {
						return fmt.Errorf("codemode: --arg %q: want KEY=VALUE", p)
					}
					m[k] = v
				}
				b, err := json.Marshal(m)
				if err != nil {
					return err
				}
				a.Args = b
			}
			data, err := callRaw(c, abi.CodemodeRun, a)
			if err != nil {
				return err
			}
			var r abi.CodeModeResult
			if err := decodeResult(data, &r); err != nil {
				return err
			}
			if c.json {
				if err := c.printJSON(data); err != nil {
					return err
				}
				if r.Status != "completed" {
					return &exitError{code: 1}
				}
				return nil
			}
			for _, l := range r.Logs {
				fmt.Fprintln(cmd.ErrOrStderr(), l)
			}
			if r.Status != "completed" {
				return &exitError{code: 1, msg: "codemode: " + r.Error}
			}
			var s string
			if json.Unmarshal(r.Result, &s) == nil {
				_, err := fmt.Fprintln(c.out, s)
				return err
			}
			if len(r.Result) == 0 {
				r.Result = json.RawMessage("null")
			}
			return c.printJSON(r.Result)
		},
	}
	cmd.Flags().StringVarP(&code, "eval", "e", "", "the block's code")
	cmd.Flags().StringVar(&target, "target", "", "the device of shell and fs calls that name none")
	cmd.Flags().StringVar(&cwd, "cwd", "", "the working directory of shell calls that name none (and, on this machine, of relative fs paths)")
	cmd.Flags().StringVar(&pid, "pid", "", "the process to run as (default: your init)")
	cmd.Flags().StringArrayVar(&kv, "arg", nil, "KEY=VALUE of the block's args (repeatable)")
	cmd.Flags().StringVar(&argsJSON, "args-json", "", "the block's args as a JSON value")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "the run's wall time (default 30s)")
	return cmd
}

// readAllStdin reads stdin to its end.
func readAllStdin() ([]byte, error) { return io.ReadAll(os.Stdin) }
