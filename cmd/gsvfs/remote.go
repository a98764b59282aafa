package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"gsvfs.dev/gsvfs/ninep"
	"gsvfs.dev/gsvfs/vfs"
	"gsvfs.dev/gsvfs/vfs/fusefs"
)

// remoteOptions are the flags of gsvfs mount --kernel.
type remoteOptions struct {
	kernel string // the kernel's 9P dial string
	token  string // --token, else $GSV_TOKEN
	user   string // --user, else $GSV_USER, else the login name
	tlsCA  string // --tls-ca, else $GSV_TLS_CA: whom a tls dial string trusts
}

// remoteCheckEvery is how often a remote mount checks that its kernel is
// still there; a mount whose connection is lost is unmounted.
const remoteCheckEvery = 10 * time.Second

// mountRemote is gsvfs mount DIR --kernel ADDR: it runs no kernel, but
// attaches to the kernel at ADDR over 9P (with the token, if any) and
// serves that namespace on DIR with FUSE (ninep.RemoteDir), until SIGINT
// or SIGTERM, or until the connection is lost. Every operation on DIR is
// the attach's identity at the kernel; only the host user running the
// mount may use DIR (as root the mount is allow_other, so other host users
// are refused here).
func mountRemote(ctx context.Context, o options, ro remoteOptions, dir string) error {
	if o.http != "" {
		return fmt.Errorf("--http serves this machine's kernel: it has no use with --kernel %s", ro.kernel)
	}
	log, err := newLogger(o.logLevel)
	if err != nil {
		return err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return err
	}
	user := ro.user
	if user == "" {
		user = os.Getenv("GSV_USER")
	}
	if user == "" {
		user = hostUser()
	}
	tok := ro.token
	if tok == "" {
		tok = os.Getenv("GSV_TOKEN")
	}
	var secret []byte
	if tok != "" {
		secret = []byte(tok)
	}
	ignoreSIGPIPE()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	dialer, err := kernelDialer(ro.tlsCA)
	if err != nil {
		return err
	}
	fsys, err := dialer.Mount(ro.kernel, user, secret)
	if err != nil {
		return fmt.Errorf("attach to %s: %w", ro.kernel, err)
	}
	defer fsys.Close()
	// df asks the kernel's /sys/statfs: 9P2000 has no statfs.
	root := ninep.RemoteDir(fsys, "/", ninep.RemoteOptions{Statfs: "/sys/statfs"})
	if _, err := root.Attr(ctx, nil); err != nil {
		return fmt.Errorf("%s: %w", ro.kernel, err)
	}
	fsrv, err := fusefs.Mount(dir, root, ownerOnly(os.Getuid()), fusefs.Options{Logger: log, Debug: o.debug, FsName: "gsv-remote", MakeDir: true})
	if err != nil {
		return fmt.Errorf("mount %s: %w", dir, err)
	}
	log.Info("ready", "mount", dir, "kernel", ro.kernel, "user", user)

	done := make(chan struct{})
	go func() { fsrv.Wait(); close(done) }()
	tick := time.NewTicker(remoteCheckEvery)
	defer tick.Stop()
	var lost error
wait:
	for {
		select {
		case <-ctx.Done():
			break wait
		case <-done:
			log.Warn("the mount went away", "mount", dir)
			return nil
		case <-tick.C:
			cctx, cancel := context.WithTimeout(ctx, remoteCheckEvery)
			_, err := root.Attr(cctx, nil)
			cancel()
			if err != nil && vfs.Errno(err) == syscall.EIO {
				lost = err
				log.Error("lost the kernel", "kernel", ro.kernel, "err", err)
				break wait
			}
		}
	}
	if err := fsrv.Unmount(); err != nil {
		log.Error("unmount", "err", err)
		return err
	}
	log.Info("unmounted", "mount", dir)
	return lost
}

// ownerOnly is the Authenticator of a remote mount: the host user uid
// (the one running the mount) passes, anyone else is refused.
type ownerOnly int

func (u ownerOnly) Authenticate(ctx context.Context, p vfs.Peer) (vfs.Cred, error) {
	if p.HostUID != int(u) {
		return nil, vfs.ErrPermission
	}
	return nil, nil
}

// kernelDialer dials a kernel: a tls!host!port dial string trusts the PEM
// certificates in caFile (else $GSV_TLS_CA, else the system's roots).
func kernelDialer(caFile string) (ninep.Dialer, error) {
	if caFile == "" {
		caFile = os.Getenv("GSV_TLS_CA")
	}
	conf, err := ninep.CAConfig(caFile)
	if err != nil {
		return ninep.Dialer{}, err
	}
	return ninep.Dialer{TLS: conf}, nil
}
