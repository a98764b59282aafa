package main

// gsv crontab: a user's schedules as one text, like crontab(1). -l prints
// it (sched.crontab.get), FILE or - installs one (sched.crontab.set, which
// reconciles the whole crontab: a kept name keeps its schedule id, and a
// line that does not parse changes nothing), -e edits it in $VISUAL or
// $EDITOR.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

func (c *cli) crontabCmd() *cobra.Command {
	var list, edit bool
	var user string
	cmd := &cobra.Command{
		Use:   "crontab [-u USER] (-l | -e | FILE | -)",
		Short: "Print, install or edit your crontab: your schedules as text (sched.crontab.*)",
		Long: "Like crontab(1): -l prints your crontab, FILE (or - for stdin) installs it in place of the\n" +
			"one you have, and -e edits it with $VISUAL, else $EDITOR, else vi, and installs it if it was\n" +
			"changed. Installing reconciles your schedules with the text: a line that keeps its name (and\n" +
			"id) keeps its schedule, a line that is gone removes its schedule, and a line that does not\n" +
			"parse rejects the whole crontab and changes nothing (-e then offers to edit it again).\n" +
			"-u USER acts on USER's crontab (root only). The format, one schedule a line:\n" +
			"  CRON_TZ=Europe/Paris\n" +
			"  */15 * * * *   event <pid> check the inbox            # name=inbox\n" +
			"  0 9 * * 1-5    spawn task summarize yesterday's logs   # name=standup\n" +
			"  @every 1h      lifecycle <pid> compact keep=80\n" +
			"  @after 10m     event <pid> remind me to stretch\n" +
			"  @at 2026-12-01T09:00:00Z  spawn task renew the certificate\n" +
			"  #disabled @daily spawn task tidy up                   # name=tidy",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			modes := len(args)
			if list {
				modes++
			}
			if edit {
				modes++
			}
			if modes != 1 {
				return errors.New("crontab: give one of -l, -e, FILE or - (stdin)")
			}
			// owner is the crontab's owner (-u), or nil for the caller's.
			var owner *uint32
			if cmd.Flags().Changed("user") {
				uid, err := c.lookupUid(user)
				if err != nil {
					return err
				}
				owner = &uid
			}
			switch {
			case list:
				text, err := c.crontabGet(owner)
				if err != nil {
					return err
				}
				_, err = io.WriteString(c.out, text)
				return err
			case edit:
				return c.crontabEdit(cmd, owner)
			}
			var b []byte
			var err error
			if args[0] == "-" {
				b, err = io.ReadAll(cmd.InOrStdin())
			} else {
				b, err = os.ReadFile(args[0])
			}
			if err != nil {
				return err
			}
			return c.crontabSet(owner, string(b))
		},
	}
	cmd.Flags().BoolVarP(&list, "list", "l", false, "print the crontab")
	cmd.Flags().BoolVarP(&edit, "edit", "e", false, "edit the crontab with $VISUAL or $EDITOR")
	cmd.Flags().StringVarP(&user, "user", "u", "", "the user whose crontab it is (root only)")
	return cmd
}

// lookupUid maps a user name (or a uid) to its uid through sys.user.list.
func (c *cli) lookupUid(name string) (uint32, error) {
	r, err := call(c, abi.SysUserList, &abi.UserListArgs{})
	if err != nil {
		return 0, err
	}
	for _, u := range r.Users {
		if u.Username == name {
			return u.Uid, nil
		}
	}
	if n, err := strconv.ParseUint(name, 10, 32); err == nil {
		return uint32(n), nil
	}
	return 0, fmt.Errorf("crontab: user %s unknown", name)
}

// crontabGet returns the text of owner's crontab (nil: the caller's).
func (c *cli) crontabGet(owner *uint32) (string, error) {
	r, err := call(c, abi.SchedCrontabGet, &abi.CrontabGetArgs{OwnerUid: owner})
	if err != nil {
		return "", err
	}
	return r.Text, nil
}

// crontabSet installs text as owner's crontab (nil: the caller's); --json
// prints what it added, updated and removed.
func (c *cli) crontabSet(owner *uint32, text string) error {
	return show(c, abi.SchedCrontabSet, &abi.CrontabSetArgs{OwnerUid: owner, Text: text},
		func(*abi.CrontabSetResult) error { return nil })
}

// crontabEdit is crontab -e: the crontab is copied to a temporary file,
// edited, and installed if it changed. When it does not install (a line
// does not parse), the user is asked whether to edit it again; no leaves
// the edits in the file and fails.
func (c *cli) crontabEdit(cmd *cobra.Command, owner *uint32) error {
	text, err := c.crontabGet(owner)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp("", "crontab.")
	if err != nil {
		return err
	}
	path := f.Name()
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return err
	}
	keep := false
	defer func() {
		if !keep {
			os.Remove(path)
		}
	}()
	editor := os.Getenv("VISUAL")
	if editor == "" {
		editor = os.Getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	stderr := cmd.ErrOrStderr()
	for {
		// As git does: $EDITOR may hold arguments, and is run by the shell.
		ed := exec.Command("sh", "-c", editor+` "$@"`, editor, path)
		ed.Stdin, ed.Stdout, ed.Stderr = cmd.InOrStdin(), cmd.OutOrStdout(), stderr
		if err := ed.Run(); err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return fmt.Errorf("crontab: %q exited with status %d; no changes made to crontab", editor, ee.ExitCode())
			}
			return fmt.Errorf("crontab: run %q: %w", editor, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("crontab: read the edited crontab: %w", err)
		}
		if bytes.Equal(b, []byte(text)) {
			fmt.Fprintln(stderr, "crontab: no changes made to crontab")
			return nil
		}
		fmt.Fprintln(stderr, "crontab: installing new crontab")
		err = c.crontabSet(owner, string(b))
		if err == nil {
			return nil
		}
		if ce := (*callError)(nil); !errors.As(err, &ce) || ce.Code != 400 {
			// Not a crontab that does not parse: asking again would not help.
			keep = true
			return fmt.Errorf("%w; edits left in %s", err, path)
		}
		fmt.Fprintf(stderr, "gsv: %v\n", err)
		again, err := askYesNo(cmd.InOrStdin(), stderr, "edit again? [y/n] ")
		if err != nil || !again {
			keep = true
			return fmt.Errorf("crontab: not installed; edits left in %s", path)
		}
	}
}

// askYesNo asks until it reads y or n. It reads one byte at a time, so
// that what follows the answer on stdin is left for the editor; EOF is an
// error.
func askYesNo(in io.Reader, out io.Writer, prompt string) (bool, error) {
	for {
		fmt.Fprint(out, prompt)
		var line []byte
		b := make([]byte, 1)
		for {
			n, err := in.Read(b)
			if n == 1 {
				if b[0] == '\n' {
					break
				}
				line = append(line, b[0])
				continue
			}
			if err != nil {
				if err == io.EOF && len(line) > 0 {
					break
				}
				fmt.Fprintln(out)
				return false, err
			}
		}
		if f, ok := in.(*os.File); !ok || !isTerminal(f) {
			fmt.Fprintf(out, "%s\n", line) // the terminal did not echo it
		}
		switch strings.ToLower(strings.TrimSpace(string(line))) {
		case "y", "yes":
			return true, nil
		case "n", "no":
			return false, nil
		}
		prompt = "please answer y or n: "
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
