// Command gsv is the thin GSV command line. It speaks 9P to a gsvfs daemon
// and does one thing: write request frames to /sys/call and print the
// response. The daemon is found through $GSV_ADDR (a dial string such as
// unix!/path/to/9p.sock or tcp!host!port) or the default state directory's
// socket. Over TCP it authenticates with $GSV_TOKEN as $GSV_USER.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/ninep"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status: 0, or 1 with
// the error on stderr; gsv exec exits with its command's code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := rootCmd(stdout)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(stderr, "gsv:", ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(stderr, "gsv:", err)
		return 1
	}
	return 0
}

type cli struct {
	out  io.Writer
	json bool
	// isTTY is set by chat when stdin is a terminal.
	isTTY bool
}

func rootCmd(out io.Writer) *cobra.Command {
	c := &cli{out: out}
	root := &cobra.Command{
		Use:           "gsv",
		Short:         "Make GSV syscalls through the namespace's /sys/call",
		Version:       abi.BuildVersion(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&c.json, "json", false, "print the raw JSON result")

	root.AddCommand(c.callCmd())

	root.AddCommand(&cobra.Command{
		Use:   "whoami",
		Short: "Print who the daemon says you are",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(c, abi.SysWhoami, &abi.WhoamiArgs{}, func(w *abi.WhoamiResult) error {
				_, err := fmt.Fprintf(c.out, "%s uid=%d gid=%d home=%s role=%s capabilities=%s\n", w.Process.Username, w.Process.Uid,
					w.Process.Gid, w.Process.Home, w.Role, strings.Join(w.Capabilities, ","))
				return err
			})
		},
	})
	root.AddCommand(c.configCmd(), c.tokenCmd(), c.userCmd())

	c.addProcCommands(root)
	c.addRunCommands(root)
	root.AddCommand(c.schedCmd())
	root.AddCommand(c.crontabCmd())
	root.AddCommand(c.chatCmd())
	root.AddCommand(c.sessionCmd(), c.execCmd())
	root.AddCommand(c.deviceCmd())
	root.AddCommand(c.ipcCmd(), c.watchCmd())
	root.AddCommand(c.notifyCmd())
	root.AddCommand(c.auditCmd(), c.statusCmd())
	root.AddCommand(c.adapterCmd(), c.linkCmd(), c.unlinkCmd())
	root.AddCommand(c.repoCmd(), c.homeCmd(), c.workspaceCmd(), c.forkCmd())
	root.AddCommand(c.pkgCmd())
	root.AddCommand(c.loginLinkCmd())
	root.AddCommand(c.mcpCmd())
	root.AddCommand(c.codemodeCmd())
	c.addCompletions(root)
	return root
}

// Addr returns the daemon's dial string: $GSV_ADDR, else the socket in
// $GSV_STATE or ~/.local/share/gsv.
func Addr() string {
	if a := os.Getenv("GSV_ADDR"); a != "" {
		return a
	}
	state := os.Getenv("GSV_STATE")
	if state == "" {
		home, _ := os.UserHomeDir()
		state = filepath.Join(home, ".local", "share", "gsv")
	}
	return "unix!" + filepath.Join(state, "9p.sock")
}

// mount attaches to the daemon's namespace over 9P as $GSV_USER (else
// $USER), with $GSV_TOKEN if set.
func mount() (*client.Fsys, error) {
	user := os.Getenv("GSV_USER")
	if user == "" {
		user = os.Getenv("USER")
	}
	var token []byte
	if t := os.Getenv("GSV_TOKEN"); t != "" {
		token = []byte(t)
	}
	if err := needToken(Addr(), token); err != nil {
		return nil, err
	}
	conf, err := ninep.CAConfig(os.Getenv("GSV_TLS_CA"))
	if err != nil {
		return nil, err
	}
	fsys, err := ninep.Dialer{TLS: conf}.Mount(Addr(), user, token)
	if err != nil {
		return nil, connectError(Addr(), err)
	}
	return fsys, nil
}

// call writes one request frame to /sys/call and returns the response's
// data. A failed frame, or data carrying the seed's {ok:false,error}, is an
// error.
func (c *cli) call(name string, args any) (json.RawMessage, error) {
	fsys, err := mount()
	if err != nil {
		return nil, err
	}
	defer fsys.Close()
	fid, err := fsys.Open("/sys/call", plan9.ORDWR)
	if err != nil {
		return nil, err
	}
	defer fid.Close()
	raw, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	req, err := json.Marshal(abi.Request{Type: "req", ID: "1", Call: name, Args: raw})
	if err != nil {
		return nil, err
	}
	if _, err := fid.Write(append(req, '\n')); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(fid)
	if err != nil {
		return nil, err
	}
	var resp struct { // abi.Response, its data kept raw
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *abi.FrameError `json:"error"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, fmt.Errorf("bad response %q: %w", b, err)
	}
	if !resp.OK {
		if resp.Error == nil {
			return nil, errors.New(name + ": failed")
		}
		return nil, &callError{resp.Error.Message, resp.Error.Code}
	}
	var op struct {
		OK    *bool  `json:"ok"`
		Error string `json:"error"`
	}
	if json.Unmarshal(resp.Data, &op) == nil && op.OK != nil && !*op.OK {
		return resp.Data, fmt.Errorf("%s: %s", name, op.Error)
	}
	return resp.Data, nil
}

// callError is a failed request frame: the syscall's message and code.
type callError struct {
	Message string
	Code    int
}

func (e *callError) Error() string { return fmt.Sprintf("%s (%d)", e.Message, e.Code) }

func (c *cli) orJSON(data json.RawMessage, err error) error {
	if err != nil {
		return err
	}
	return c.printJSON(data)
}

func (c *cli) printJSON(data json.RawMessage) error {
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(c.out, "%s\n", b)
	return err
}
