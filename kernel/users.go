package kernel

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// Well-known ids.
const (
	RootUID    = 0
	RootGID    = 0
	UsersGID   = 100
	FirstUID   = 1000
	UsersGroup = "users"
)

// UserHook is a function that OnUserCreated runs as a user is created.
type UserHook func(tx *Tx, u *User) error

// OnUserCreated registers h to run whenever a user is created: by
// sys.user.add or by sys.setup's first user. h runs
// inside the store transaction that inserts the user (a fn of Store.Tx,
// after the user's row and group membership are written), so that the
// user and what h writes exist together or not at all: an error from h
// rolls the user back and the creation fails with that error. Like any fn
// of Store.Tx, h must not call Tx or Exec, and uses tx's context-free
// methods. Hooks run in the order they were registered.
//
// Subsystems register their hooks before the kernel serves, as they
// register their syscalls. A user created before a hook was registered
// is not seen by it, and root, whom Open makes before anyone can register
// a hook, never is: a subsystem that keeps a record per user makes the
// missing ones when it starts, from Users.
func (k *Kernel) OnUserCreated(h UserHook) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.userHooks = append(k.userHooks, h)
}

// userCreatedHooks returns the hooks of OnUserCreated.
func (k *Kernel) userCreatedHooks() []UserHook {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return append([]UserHook(nil), k.userHooks...)
}

// runUserHooks runs hooks for u in tx, the transaction that created u.
func runUserHooks(tx *Tx, hooks []UserHook, u *User) error {
	for _, h := range hooks {
		if err := h(tx, u); err != nil {
			return err
		}
	}
	return nil
}

// seed makes root, the root and users groups and the default config, once.
func (k *Kernel) seed() error {
	ctx := context.Background()
	err := k.Store.Tx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM users WHERE uid=0`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return nil
		}
		stmts := []struct {
			q    string
			args []any
		}{
			{`INSERT INTO groups(gid,name) VALUES(0,'root'),(100,'users')`, nil},
			{`INSERT INTO users(uid,username,gid,home,host_uid,gecos,created_at) VALUES(0,'root',0,'/home/root',0,'root',?)`, []any{now()}},
		}
		for key, val := range defaultConfig {
			stmts = append(stmts, struct {
				q    string
				args []any
			}{`INSERT INTO config(key,value) VALUES(?,?) ON CONFLICT DO NOTHING`, []any{key, val}})
		}
		for _, s := range stmts {
			if _, err := tx.Exec(s.q, s.args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("seed: %w", err)
	}
	var v string
	err = k.Store.QueryRowContext(context.Background(), `SELECT value FROM config WHERE key='sys/setup'`).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("seed: %w", err)
	}
	k.setUp.Store(v != "")
	return nil
}

// identity loads the identity of uid: its user record, its groups and
// the capabilities of those groups.
func (k *Kernel) identity(ctx context.Context, uid uint32) (*Identity, error) {
	who := abi.Path(fmt.Sprintf("uid %d", uid))
	id := &Identity{Identity: abi.Identity{Role: "user", Uid: uid}, HostUID: -1}
	var host sql.NullInt64
	err := k.Store.QueryRowContext(ctx, `SELECT username,gid,home,host_uid FROM users WHERE uid=?`, uid).
		Scan(&id.Username, &id.Gid, &id.Home, &host)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, abi.E(abi.NotExist, fmt.Sprintf("no user with uid %d", uid))
	}
	if err != nil {
		return nil, abi.E(who, err)
	}
	if host.Valid {
		id.HostUID = int(host.Int64)
	}
	id.Cwd = id.Home
	id.Gids = []uint32{id.Gid}
	err = k.Store.eachRow(ctx, func(rows *sql.Rows) error {
		var g uint32
		if err := rows.Scan(&g); err != nil {
			return err
		}
		if g != id.Gid {
			id.Gids = append(id.Gids, g)
		}
		return nil
	}, `SELECT gid FROM group_members WHERE uid=? ORDER BY gid`, uid)
	if err != nil {
		return nil, abi.E(who, err)
	}
	k.deriveCaps(id)
	return id, nil
}

// deriveCaps gives id the capabilities the kernel derives from the grants
// of the registered syscalls: the root group may make every syscall
// ("*"), the users group those granted to abi.Users, others none.
func (k *Kernel) deriveCaps(id *Identity) {
	switch {
	case id.InGroup(0):
		id.Capabilities = []string{"*"}
	case id.InGroup(100):
		id.Capabilities, id.grants, id.class = nil, k, abi.Users
	default:
		id.Capabilities = []string{}
	}
}

// identityForHostUID maps a host uid to its user, or to nobody.
func (k *Kernel) identityForHostUID(ctx context.Context, hostUID int) (*Identity, error) {
	var uid uint32
	err := k.Store.QueryRowContext(ctx, `SELECT uid FROM users WHERE host_uid=?`, hostUID).Scan(&uid)
	if errors.Is(err, sql.ErrNoRows) {
		return k.nobody(hostUID), nil
	}
	if err != nil {
		return nil, abi.E(abi.Path(fmt.Sprintf("host uid %d", hostUID)), err)
	}
	return k.identity(ctx, uid)
}

// User is a user record (abi.User), as /etc/passwd shows it.
type User = abi.User

// Group is a group record (abi.Group), as /etc/group shows it.
type Group = abi.Group

var validUsername = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// userSyscalls is the table of the identity, user and group syscalls.
func (k *Kernel) userSyscalls() []Syscall {
	return []Syscall{
		Handle(abi.SysWhoami, k.whoami),
		Handle(abi.SysSyscallList, k.syscallList),
		Handle(abi.SysSetup, k.setup),
		Handle(abi.SysUserAdd, k.userAdd),
		Handle(abi.SysUserList, k.userList),
		Handle(abi.SysGroupList, k.groupList),
	}
}

// whoami serves sys.whoami: the caller's role, process identity and
// capabilities.
func (k *Kernel) whoami(ctx context.Context, c *Caller, _ *abi.WhoamiArgs) (*abi.WhoamiResult, error) {
	id := c.Identity
	return &abi.WhoamiResult{
		Role: id.Role,
		Process: abi.ProcessIdentity{Uid: id.Uid, Gid: id.Gid, Gids: id.Gids, Username: id.Username,
			Home: id.Home, Cwd: id.Cwd, WorkspaceID: id.WorkspaceID},
		Capabilities: id.Caps(),
	}, nil
}

// setup serves sys.setup (root or the kernel, once): it makes the first
// user (or takes root as it), writes the time zone and AI configuration it
// is given, marks the system set up and signals sys.setup to everyone.
func (k *Kernel) setup(ctx context.Context, c *Caller, a *abi.SetupArgs) (*abi.SetupResult, error) {
	if !c.IsRoot() {
		return nil, abi.E(abi.Permission, "only root or the kernel may set the system up")
	}
	if k.isSetUp() {
		return nil, abi.E(abi.Busy, "already set up")
	}
	if a.Timezone != "" {
		if _, err := time.LoadLocation(a.Timezone); err != nil {
			return nil, abi.E(abi.Invalid, fmt.Sprintf("unknown time zone %q", a.Timezone))
		}
	}
	var u *User
	var err error
	if a.Username == "" || a.Username == "root" || (a.HostUID != nil && *a.HostUID == 0) {
		u, err = k.userByUID(ctx, RootUID)
	} else {
		u, err = k.addUser(ctx, &abi.UserAddArgs{Username: a.Username, HostUID: a.HostUID})
	}
	if err != nil {
		return nil, err
	}
	err = k.Store.Tx(ctx, func(tx *Tx) error {
		set := func(key, val string) error {
			_, err := tx.Exec(`INSERT INTO config(key,value) VALUES(?,?) ON CONFLICT(key) DO UPDATE SET value=excluded.value`, key, val)
			return err
		}
		if a.Timezone != "" {
			if err := set("config/system/timezone", a.Timezone); err != nil {
				return err
			}
		}
		if a.AI != nil {
			for key, val := range map[string]string{"config/ai/provider": a.AI.Provider, "config/ai/model": a.AI.Model, "config/ai/api_key": a.AI.APIKey} {
				if val != "" {
					if err := set(key, val); err != nil {
						return err
					}
				}
			}
		}
		return set("sys/setup", time.Now().UTC().Format(time.RFC3339))
	})
	if err != nil {
		return nil, abi.E(err)
	}
	k.setUp.Store(true)
	id, err := k.identity(ctx, u.Uid)
	if err != nil {
		return nil, err
	}
	publish(k, abi.SigSysSetup, abi.UserSignal{Uid: u.Uid, Username: u.Username}, audience{all: true})
	return &abi.SetupResult{User: id.Record(), RootLocked: true}, nil
}

// userAdd serves sys.user.add (root only) and signals sys.user.added.
func (k *Kernel) userAdd(ctx context.Context, c *Caller, a *abi.UserAddArgs) (*User, error) {
	if !c.IsRoot() {
		return nil, abi.E(abi.Permission, "only root may add users")
	}
	u, err := k.addUser(ctx, a)
	if err != nil {
		return nil, err
	}
	publish(k, abi.SigUserAdded, abi.UserSignal{Uid: u.Uid, Username: u.Username}, audience{all: true})
	return u, nil
}

// userList serves sys.user.list: every user, by uid.
func (k *Kernel) userList(ctx context.Context, c *Caller, _ *abi.UserListArgs) (*abi.UserListResult, error) {
	us, err := k.users(ctx)
	if err != nil {
		return nil, err
	}
	return &abi.UserListResult{Users: us}, nil
}

// groupList serves sys.group.list: every group with its members, by gid.
func (k *Kernel) groupList(ctx context.Context, c *Caller, _ *abi.GroupListArgs) (*abi.GroupListResult, error) {
	gs, err := k.groups(ctx)
	if err != nil {
		return nil, err
	}
	return &abi.GroupListResult{Groups: gs}, nil
}

// addUser creates a user in the users group, running the hooks of
// OnUserCreated (the local device's: its home) in the creating
// transaction.
func (k *Kernel) addUser(ctx context.Context, a *abi.UserAddArgs) (*User, error) {
	if !validUsername.MatchString(a.Username) {
		return nil, abi.E(abi.Path(a.Username), abi.Invalid, "user names are 1-32 of [a-z0-9_-], starting with a letter or _")
	}
	if strings.ContainsAny(a.Gecos, ":\n\x00") {
		return nil, abi.E(abi.Path(a.Username), abi.Invalid, "gecos may not contain ':' or newlines")
	}
	if a.HostUID != nil && (*a.HostUID < 0 || *a.HostUID == 0) {
		return nil, abi.E(abi.Path(a.Username), abi.Invalid, "host uid 0 is root's; give a positive host uid")
	}
	u := &User{Gid: UsersGID, Username: a.Username, Home: "/home/" + a.Username, Gecos: a.Gecos, HostUID: a.HostUID, Created: now()}
	hooks := k.userCreatedHooks()
	err := k.Store.Tx(ctx, func(tx *Tx) error {
		var n int
		if err := tx.QueryRow(`SELECT count(*) FROM users WHERE username=?`, a.Username).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return abi.E(abi.Path(a.Username), abi.Busy, "user already exists")
		}
		if a.HostUID != nil {
			if err := tx.QueryRow(`SELECT count(*) FROM users WHERE host_uid=?`, *a.HostUID).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return abi.E(abi.Path(a.Username), abi.Busy, fmt.Sprintf("host uid %d already maps to a user", *a.HostUID))
			}
		}
		if a.Uid != nil {
			if *a.Uid < FirstUID || *a.Uid > 60000 {
				return abi.E(abi.Path(a.Username), abi.Invalid, "uids are 1000-60000")
			}
			u.Uid = uint32(*a.Uid)
		} else {
			var max sql.NullInt64
			if err := tx.QueryRow(`SELECT max(uid) FROM users WHERE uid >= ? AND uid < 60000`, FirstUID).Scan(&max); err != nil {
				return err
			}
			u.Uid = FirstUID
			if max.Valid {
				u.Uid = uint32(max.Int64) + 1
			}
		}
		if _, err := tx.Exec(`INSERT INTO users(uid,username,gid,home,host_uid,gecos,created_at) VALUES(?,?,?,?,?,?,?)`,
			u.Uid, u.Username, u.Gid, u.Home, a.HostUID, u.Gecos, u.Created); err != nil {
			return abi.E(abi.Path(a.Username), abi.Busy, err)
		}
		if _, err := tx.Exec(`INSERT INTO group_members(gid,uid) VALUES(?,?)`, UsersGID, u.Uid); err != nil {
			return err
		}
		if err := runUserHooks(tx, hooks, u); err != nil {
			return abi.E(abi.Path(a.Username), err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return u, nil
}

func (k *Kernel) userByUID(ctx context.Context, uid uint32) (*User, error) {
	us, err := k.queryUsers(ctx, `WHERE uid=?`, uid)
	if err != nil {
		return nil, err
	}
	if len(us) == 0 {
		return nil, abi.E(abi.NotExist, fmt.Sprintf("no user with uid %d", uid))
	}
	return &us[0], nil
}

func (k *Kernel) userByName(ctx context.Context, name string) (*User, error) {
	us, err := k.queryUsers(ctx, `WHERE username=?`, name)
	if err != nil {
		return nil, err
	}
	if len(us) == 0 {
		return nil, abi.E(abi.Path(name), abi.NotExist, "no such user")
	}
	return &us[0], nil
}

func (k *Kernel) users(ctx context.Context) ([]User, error) { return k.queryUsers(ctx, "") }

func (k *Kernel) queryUsers(ctx context.Context, where string, args ...any) ([]User, error) {
	rows, err := k.Store.QueryContext(ctx, `SELECT uid,gid,username,home,gecos,host_uid,created_at FROM users `+where+` ORDER BY uid`, args...)
	if err != nil {
		return nil, abi.E(fmt.Errorf("users: %w", err))
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		var u User
		var host sql.NullInt64
		if err := rows.Scan(&u.Uid, &u.Gid, &u.Username, &u.Home, &u.Gecos, &host, &u.Created); err != nil {
			return nil, abi.E(fmt.Errorf("users: %w", err))
		}
		if host.Valid {
			h := int(host.Int64)
			u.HostUID = &h
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

func (k *Kernel) groups(ctx context.Context) ([]Group, error) {
	rows, err := k.Store.QueryContext(ctx, `SELECT g.gid, g.name, u.username FROM groups g
		LEFT JOIN group_members m ON m.gid=g.gid LEFT JOIN users u ON u.uid=m.uid ORDER BY g.gid, u.uid`)
	if err != nil {
		return nil, abi.E(fmt.Errorf("groups: %w", err))
	}
	defer rows.Close()
	var out []Group
	for rows.Next() {
		var g Group
		var member sql.NullString
		if err := rows.Scan(&g.Gid, &g.Name, &member); err != nil {
			return nil, abi.E(fmt.Errorf("groups: %w", err))
		}
		if n := len(out); n > 0 && out[n-1].Gid == g.Gid {
			if member.Valid {
				out[n-1].Members = append(out[n-1].Members, member.String)
			}
			continue
		}
		g.Members = []string{}
		if member.Valid {
			g.Members = append(g.Members, member.String)
		}
		out = append(out, g)
	}
	return out, rows.Err()
}
