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
	"text/tabwriter"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/ninep"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status: 0, or 1 with
// the error on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := rootCmd(stdout)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.Execute(); err != nil {
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
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVar(&c.json, "json", false, "print the raw JSON result")

	root.AddCommand(&cobra.Command{
		Use:   "call NAME [ARGS-JSON]",
		Short: "Make any syscall and print its result as JSON",
		Args:  cobra.RangeArgs(1, 2),
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
	})

	root.AddCommand(&cobra.Command{
		Use:   "whoami",
		Short: "Print who the daemon says you are",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := c.call("sys.whoami", nil)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var w struct {
				Role    string `json:"role"`
				Process struct {
					Uid      uint32 `json:"uid"`
					Gid      uint32 `json:"gid"`
					Username string `json:"username"`
					Home     string `json:"home"`
				} `json:"process"`
				Capabilities []string `json:"capabilities"`
			}
			if err := json.Unmarshal(data, &w); err != nil {
				return err
			}
			fmt.Fprintf(c.out, "%s uid=%d gid=%d home=%s role=%s capabilities=%s\n", w.Process.Username, w.Process.Uid,
				w.Process.Gid, w.Process.Home, w.Role, strings.Join(w.Capabilities, ","))
			return nil
		},
	})

	config := &cobra.Command{Use: "config", Short: "Read and set configuration"}
	config.AddCommand(&cobra.Command{
		Use:   "get [KEY]",
		Short: "Print the visible config entries (under KEY) as key=value",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := map[string]string{}
			if len(args) == 1 {
				a["key"] = args[0]
			}
			data, err := c.call("sys.config.get", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Entries []struct{ Key, Value string }
			}
			json.Unmarshal(data, &r)
			if len(args) == 1 && len(r.Entries) == 0 {
				return fmt.Errorf("config key %s: not found", args[0])
			}
			for _, e := range r.Entries {
				fmt.Fprintf(c.out, "%s=%s\n", e.Key, e.Value)
			}
			return nil
		},
	})
	config.AddCommand(&cobra.Command{
		Use:   "set KEY VALUE",
		Short: "Set a config key",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := c.call("sys.config.set", map[string]string{"key": args[0], "value": args[1]})
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			return nil
		},
	})
	root.AddCommand(config)

	token := &cobra.Command{Use: "token", Short: "Create, list and revoke tokens"}
	var kind, label, reason string
	var tokUID int
	create := &cobra.Command{
		Use:   "create",
		Short: "Create a token; its secret is printed once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			a := map[string]any{"kind": kind}
			if label != "" {
				a["label"] = label
			}
			if tokUID >= 0 {
				a["uid"] = tokUID
			}
			data, err := c.call("sys.token.create", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Token struct {
					TokenID string `json:"tokenId"`
					Token   string `json:"token"`
				} `json:"token"`
			}
			json.Unmarshal(data, &r)
			fmt.Fprintf(c.out, "%s\n", r.Token.Token)
			fmt.Fprintf(cmd.ErrOrStderr(), "token id %s: the secret above is shown only once\n", r.Token.TokenID)
			return nil
		},
	}
	create.Flags().StringVar(&kind, "kind", "user", "user, service or node")
	create.Flags().StringVar(&label, "label", "", "a label for the token")
	create.Flags().IntVar(&tokUID, "uid", -1, "the uid to create it for (root only)")
	list := &cobra.Command{
		Use:   "list",
		Short: "List your tokens (root: everyone's)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			data, err := c.call("sys.token.list", map[string]any{})
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Tokens []struct {
					TokenID   string  `json:"tokenId"`
					Prefix    string  `json:"tokenPrefix"`
					Uid       uint32  `json:"uid"`
					Kind      string  `json:"kind"`
					Label     *string `json:"label"`
					RevokedAt *int64  `json:"revokedAt"`
				} `json:"tokens"`
			}
			json.Unmarshal(data, &r)
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
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\n", t.TokenID, t.Prefix, t.Uid, t.Kind, l, state)
			}
			return tw.Flush()
		},
	}
	revoke := &cobra.Command{
		Use:   "revoke TOKEN-ID",
		Short: "Revoke a token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := map[string]any{"tokenId": args[0]}
			if reason != "" {
				a["reason"] = reason
			}
			data, err := c.call("sys.token.revoke", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct{ Revoked bool }
			json.Unmarshal(data, &r)
			if !r.Revoked {
				return fmt.Errorf("token %s: not found or already revoked", args[0])
			}
			return nil
		},
	}
	revoke.Flags().StringVar(&reason, "reason", "", "why")
	token.AddCommand(create, list, revoke)
	root.AddCommand(token)

	userCmd := &cobra.Command{Use: "user", Short: "Add and list users"}
	var hostUID, uid int
	var gecos string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user (root only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a := map[string]any{"username": args[0]}
			if hostUID >= 0 {
				a["hostUid"] = hostUID
			}
			if uid >= 0 {
				a["uid"] = uid
			}
			if gecos != "" {
				a["gecos"] = gecos
			}
			data, err := c.call("sys.user.add", a)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var u struct {
				Uid  uint32 `json:"uid"`
				Home string `json:"home"`
			}
			json.Unmarshal(data, &u)
			fmt.Fprintf(c.out, "%s uid=%d home=%s\n", args[0], u.Uid, u.Home)
			return nil
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
			data, err := c.call("sys.user.list", nil)
			if err != nil || c.json {
				return c.orJSON(data, err)
			}
			var r struct {
				Users []struct {
					Uid      uint32 `json:"uid"`
					Gid      uint32 `json:"gid"`
					Username string `json:"username"`
					Home     string `json:"home"`
					HostUID  *int   `json:"hostUid"`
				} `json:"users"`
			}
			json.Unmarshal(data, &r)
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
		},
	}
	userCmd.AddCommand(add, ulist)
	root.AddCommand(userCmd)

	c.addProcCommands(root)
	root.AddCommand(c.schedCmd())
	root.AddCommand(c.crontabCmd())
	root.AddCommand(c.chatCmd())
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
	fsys, err := ninep.Mount(Addr(), user, token)
	if err != nil {
		return nil, fmt.Errorf("connect %s: %w", Addr(), err)
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
	req, err := json.Marshal(map[string]any{"type": "req", "id": "1", "call": name, "args": args})
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
	var resp struct {
		OK    bool            `json:"ok"`
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
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
