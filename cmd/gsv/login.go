package main

// gsv login-link: a one-time sign-in link for the web console, as you.

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"gsvfs.dev/gsvfs/abi"
)

// webURLKey is the config key the daemon records its web console's URL
// under when it serves --http.
const webURLKey = "config/web/url"

func (c *cli) loginLinkCmd() *cobra.Command {
	var url string
	var ttl time.Duration
	cmd := &cobra.Command{
		Use:   "login-link [--url URL] [--ttl DUR]",
		Short: "Print a one-time sign-in link for the web console, as you",
		Long: "Print a link that signs a browser in to the web console as you, once: a user token of\n" +
			"yours that expires after --ttl (10m), which the console exchanges for a session cookie\n" +
			"and revokes. The console's URL is the one the daemon serves (gsvfs mount --http\n" +
			"HOST:PORT); --url names another. Anyone with the link can sign in as you until it is\n" +
			"used or expires: send it only to yourself.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if url == "" {
				r, err := call(c, abi.SysConfigGet, &abi.ConfigGetArgs{Key: webURLKey})
				if err != nil {
					return err
				}
				for _, e := range r.Entries {
					if e.Key == webURLKey {
						url = e.Value
					}
				}
			}
			if url == "" {
				return fmt.Errorf("the daemon serves no web console: start it with --http 127.0.0.1:PORT, or give --url")
			}
			if ttl <= 0 || ttl > 24*time.Hour {
				return fmt.Errorf("--ttl %v: want a duration up to 24h", ttl)
			}
			label := "login-link"
			exp := time.Now().Add(ttl).UnixMilli()
			r, err := call(c, abi.SysTokenCreate, &abi.TokenCreateArgs{Kind: "user", Label: &label, ExpiresAt: &exp})
			if err != nil {
				return err
			}
			fmt.Fprintf(c.out, "%slogin#%s\n", strings.TrimSuffix(url, "/")+"/", r.Token.Token)
			return nil
		},
	}
	cmd.Flags().StringVar(&url, "url", "", "the console's URL (default: the daemon's, config/web/url)")
	cmd.Flags().DurationVar(&ttl, "ttl", 10*time.Minute, "how long the link is good for, if unused")
	return cmd
}
