// Package pgtest gives tests a real Postgres: Debian's postgresql
// binaries, one server per test binary started on first use, and one
// fresh database per test cloned from a template.
//
// The server runs as an unprivileged user (initdb refuses root: as root,
// the server runs as nobody through setpriv), in a data directory of its
// own under /tmp, listening only on a unix socket in that directory: no
// TCP port, nothing shared with another test binary or another helper's
// server. Durability is off (fsync, synchronous_commit): a test's
// database lives as long as the test.
//
// A supervising shell holds the server: it reads its stdin, a pipe from
// the test binary, and when the test binary ends (however it ends: the
// pipe's last writer is gone) it stops the server and removes the
// directory. No TestMain is needed.
package pgtest

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// Template is the database every test's database is cloned from.
const Template = "gsv_template"

// startLimit bounds how long the server may take to accept connections
// (liveness only: initdb and the first start on a machine at load 10).
const startLimit = 90 * time.Second

// Bin returns the directory of Debian's Postgres server binaries (the
// newest installed major version), or "" if none is installed.
func Bin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

// version is the major version in a /usr/lib/postgresql/N/bin path.
func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// server is the test binary's one Postgres.
type server struct {
	dir   string   // owned by the server's user; removed by the supervisor
	sock  string   // the unix socket's directory
	port  int      // names the socket file
	admin *sql.DB  // connected to the postgres database, to make and drop databases
	keep  *os.File // the supervisor's stdin: closed only when the test binary ends
	err   error
}

var (
	once sync.Once
	srv  server
	seq  atomic.Uint64
)

// New returns the data source name (postgres://...) of a new empty
// database, cloned from Template, on the test binary's server; the
// database is dropped when t ends. t skips if Postgres is not installed
// (Debian's postgresql; make deps) and fails if the server does not start.
func New(t testing.TB) string {
	t.Helper()
	if Bin() == "" {
		t.Skip("no Postgres (Debian's postgresql; make deps)")
	}
	once.Do(func() { srv.err = srv.start() })
	if srv.err != nil {
		t.Fatalf("pgtest: %v", srv.err)
	}
	name := fmt.Sprintf("t%d_%d", os.Getpid(), seq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), startLimit)
	defer cancel()
	if _, err := srv.admin.ExecContext(ctx, `CREATE DATABASE `+name+` TEMPLATE `+Template); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		// FORCE ends the connections a test left open.
		if _, err := srv.admin.Exec(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Logf("pgtest: drop database %s: %v", name, err)
		}
	})
	return srv.dsn(name)
}

// dsn is the data source name of database name on the server.
func (s *server) dsn(name string) string {
	q := url.Values{}
	q.Set("host", s.sock)
	q.Set("port", strconv.Itoa(s.port))
	q.Set("sslmode", "disable")
	return "postgres://postgres@/" + name + "?" + q.Encode()
}

// start makes the cluster, starts the server under its supervisor and
// makes the template.
func (s *server) start() error {
	bin := Bin()
	dir, err := os.MkdirTemp("", "gsvfs-pgtest-")
	if err != nil {
		return err
	}
	s.dir, s.sock = dir, filepath.Join(dir, "sock")
	s.port = 20000 + os.Getpid()%40000
	if err := os.Mkdir(s.sock, 0o700); err != nil {
		return err
	}
	// As root, the server's files and its process are nobody's.
	var as []string
	if os.Geteuid() == 0 {
		as = []string{"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"}
		for _, p := range []string{dir, s.sock} {
			if err := os.Chown(p, 65534, 65534); err != nil {
				return err
			}
		}
	}
	data := filepath.Join(dir, "data")
	initdb := append(append([]string{}, as...), filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres",
		"--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync")
	if out, err := exec.Command(initdb[0], initdb[1:]...).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("initdb: %v: %s", err, out)
	}
	postgres := append(append([]string{}, as...), filepath.Join(bin, "postgres"), "-D", data,
		"-k", s.sock, "-p", strconv.Itoa(s.port), "-c", "listen_addresses=",
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=400", "-c", "shared_buffers=32MB", "-c", "huge_pages=off")
	// The supervisor: the server runs until the test binary's end
	// closes the supervisor's stdin; then a fast shutdown, and the
	// directory goes.
	script := `"$@" 2>"$D/server.log" & pid=$!
		while read -r _; do :; done
		kill -INT $pid 2>/dev/null; wait $pid; rm -rf "$D"`
	cmd := exec.Command("sh", append([]string{"-c", script, "pgtest"}, postgres...)...)
	cmd.Env = append(os.Environ(), "D="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return err
	}
	s.keep = stdin.(*os.File)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	s.admin, err = sql.Open("pgx", s.dsn("postgres"))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(startLimit)
	for {
		err = s.admin.Ping()
		if err == nil {
			break
		}
		select {
		case werr := <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fmt.Errorf("postgres exited: %v: %s", werr, log)
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return fmt.Errorf("postgres did not accept connections in %v: %v: %s", startLimit, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.admin.Exec(`CREATE DATABASE ` + Template); err != nil {
		return fmt.Errorf("template: %w", err)
	}
	return nil
}
