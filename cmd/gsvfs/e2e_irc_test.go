package main_test

// The IRC kind end to end against a real IRC server (Debian's ngircd,
// started on a free loopback port with a config of the test's own): a
// person's IRC client links its nick, chats with its agent in a DM, and
// answers an approval in a channel; another nick's "yes" is no answer.

import (
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ergochat/irc-go/ircevent"
	"github.com/ergochat/irc-go/ircmsg"
)

// startNgircd starts ngircd on a free port and returns its host:port.
func startNgircd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("ngircd")
	if err != nil {
		if _, err = os.Stat("/usr/sbin/ngircd"); err != nil {
			t.Skip("no ngircd (Debian's ngircd; make deps)")
		}
		bin = "/usr/sbin/ngircd"
	}
	port := freePort(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "ngircd.conf")
	os.WriteFile(conf, []byte(fmt.Sprintf(`[Global]
Name = irc.test
Info = gsvfs test
Listen = 127.0.0.1
Ports = %d
MotdPhrase = test
[Limits]
MaxConnectionsIP = 0
MaxNickLength = 30
[Options]
PAM = no
DNS = no
Ident = no
`, port)), 0o644)
	cmd := exec.Command(bin, "-n", "-f", conf)
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("ngircd log:\n%s", log.String())
		}
	})
	waitFor(t, 30*time.Second, "ngircd listening", func() bool { return strings.Contains(log.String(), "ready") })
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// ircPerson is a person's IRC client: it keeps what it is told.
type ircPerson struct {
	c    *ircevent.Connection
	mu   sync.Mutex
	seen []string // "<target> <from>: <text>"
}

func newIRCPerson(t *testing.T, server, nick string, channels ...string) *ircPerson {
	t.Helper()
	p := &ircPerson{c: &ircevent.Connection{Server: server, Nick: nick, Log: log.New(io.Discard, "", 0)}}
	joined := make(chan struct{}, 8)
	p.c.AddCallback("PRIVMSG", func(m ircmsg.Message) {
		p.mu.Lock()
		p.seen = append(p.seen, m.Params[0]+" "+m.Nick()+": "+m.Params[1])
		p.mu.Unlock()
	})
	p.c.AddCallback("JOIN", func(m ircmsg.Message) {
		if m.Nick() == nick {
			joined <- struct{}{}
		}
	})
	if err := p.c.Connect(); err != nil {
		t.Fatal(err)
	}
	go p.c.Loop()
	t.Cleanup(p.c.Quit)
	for _, ch := range channels {
		p.c.Join(ch)
		select {
		case <-joined:
		case <-time.After(liveness):
			t.Fatalf("%s never joined %s", nick, ch)
		}
	}
	return p
}

// wait waits for a line holding want and returns it.
func (p *ircPerson) wait(t *testing.T, want string) string {
	t.Helper()
	var got string
	waitFor(t, 30*time.Second, "an IRC line holding "+want, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, s := range p.seen {
			if strings.Contains(s, want) {
				got = s
				return true
			}
		}
		return false
	})
	return got
}

// count is how many lines hold want.
func (p *ircPerson) count(want string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, s := range p.seen {
		if strings.Contains(s, want) {
			n++
		}
	}
	return n
}

func TestE2EAdapterIRC(t *testing.T) {
	server := startNgircd(t)
	s := newAdapterSetup(t, newBase(t), "irc")
	startBridge(t, "irc", "--kernel", s.listen, "--token", s.token, "--account", "testnet", "--base-url", server,
		"--opt", "tls=false", "--opt", "nick=gsvbot", "--opt", "channels=#ops")
	waitFor(t, 30*time.Second, "the IRC bridge connected", func() bool {
		st := s.accountStatus(t, "irc", "testnet")
		return st != nil && st["connected"] == true
	})
	alice := newIRCPerson(t, server, "alice", "#ops")
	bob := newIRCPerson(t, server, "bob", "#ops")

	// Link: a DM gets a code, which alice gives to gsv link.
	alice.c.Privmsg("gsvbot", "hi")
	m := linkCode.FindStringSubmatch(alice.wait(t, "gsv link"))
	if r := gsvAs(aliceHost, s.env, "link", m[1]); r.code != 0 {
		t.Fatalf("gsv link: %v", r)
	}
	// Chat: a DM reaches alice's init and the reply comes back.
	alice.c.Privmsg("gsvbot", "hello irc")
	alice.wait(t, "You said: hello irc")
	// bob is not linked: his channel messages are dropped, his DM gets a code.
	bob.c.Privmsg("#ops", "gsvbot: hello from bob")

	// An approval answered in the channel: bob's yes is no answer,
	// alice's is.
	if r := gsvAs(aliceHost, s.env, "call", "fs.write", `{"path":"~/gone.txt","content":"x"}`); r.code != 0 {
		t.Fatalf("fs.write: %v", r)
	}
	alice.c.Privmsg("#ops", `gsvbot: use Delete {"path":"~/gone.txt"}`)
	alice.wait(t, "yes / no / always")
	bob.c.Privmsg("#ops", "yes")
	alice.c.Privmsg("#ops", "yes")
	alice.wait(t, "#ops gsvbot: Approved.")
	alice.wait(t, "Delete: ")
	if _, err := os.Stat(filepath.Join(s.d.state, "fs/home/alice/gone.txt")); !os.IsNotExist(err) {
		t.Fatalf("gone.txt after the approval: %v", err)
	}
	if n := alice.count("Approved."); n != 1 {
		t.Fatalf("%d approvals", n)
	}
	if n := bob.count("hello from bob"); n != 0 || alice.count("You said: hello from bob") != 0 {
		t.Fatal("bob's unlinked message reached an agent")
	}
	// The account's status, as a file.
	if r := gsvAs(aliceHost, s.env, "adapter", "list"); r.code != 0 || !strings.Contains(r.stdout, "testnet") {
		t.Fatalf("gsv adapter list: %v", r)
	}
}
