package abi

import "context"

// The kernel's own syscalls: identity, users and groups, config, tokens,
// the signal bus and the err views.
var (
	SysWhoami = Call[WhoamiArgs, *WhoamiResult]{Name: "sys.whoami", Grant: Users,
		Doc: "The caller's role, process identity and capabilities."}
	SysSyscallList = Call[SyscallListArgs, *SyscallListResult]{Name: "sys.syscall.list", Grant: Users,
		Doc: "The public syscalls the caller may make, sorted."}
	SysSetup = Call[SetupArgs, *SetupResult]{Name: "sys.setup", Flags: BeforeSetup,
		Doc: "Sets the system up once: makes the first user and locks root's password login."}
	SysUserAdd = Call[UserAddArgs, *User]{Name: "sys.user.add",
		Doc: "Adds a user (root only) with a home and the users group."}
	SysUserList = Call[UserListArgs, *UserListResult]{Name: "sys.user.list", Grant: Users | Strangers,
		Doc: "Every user, by uid: what /etc/passwd shows."}
	SysGroupList = Call[GroupListArgs, *GroupListResult]{Name: "sys.group.list", Grant: Users | Strangers,
		Doc: "Every group with its members, by gid: what /etc/group shows."}
	SysConfigGet = Call[ConfigGetArgs, *ConfigGetResult]{Name: "sys.config.get", Grant: Users,
		Doc: "A config key's value, or the keys under a prefix, that the caller may read."}
	SysConfigSet = Call[ConfigSetArgs, *ConfigSetResult]{Name: "sys.config.set", Grant: Users,
		Doc: "Sets a config key the caller may write (system keys: root; users/<uid>/...: its user)."}
	SysConfigUnset = Call[ConfigUnsetArgs, *ConfigSetResult]{Name: "sys.config.unset", Grant: Users,
		Doc: "Removes a config key the caller may write."}
	SysTokenCreate = Call[TokenCreateArgs, *TokenCreateResult]{Name: "sys.token.create", Grant: Users,
		Doc: "Makes a token for the caller (root: for any user); its raw value is shown once."}
	SysTokenList = Call[TokenListArgs, *TokenListResult]{Name: "sys.token.list", Grant: Users,
		Doc: "The caller's tokens (root: everyone's), without their raw values."}
	SysTokenRevoke = Call[TokenRevokeArgs, *TokenRevokeResult]{Name: "sys.token.revoke", Grant: Users,
		Doc: "Revokes a token: every session attached with it ends."}
	SysEvents = Call[struct{}, EventStream]{Name: "sys.events", Grant: Users, Flags: Internal,
		Doc: "A live subscription to the signals the caller may see, from now (/sys/events)."}
	SysLastError = Call[LastErrorArgs, string]{Name: "sys.lasterror", Grant: Users, Flags: Internal,
		Doc: "The message of the caller's last failure in a namespace directory (its err view)."}
)

// EventStream is a live subscription to signals: the records a stream
// file serves, one per read.
type EventStream interface {
	// Next blocks until the next record or until ctx ends.
	Next(ctx context.Context) ([]byte, error)
	// Poll returns the next record if one is ready.
	Poll() ([]byte, bool)
	// Close ends the subscription.
	Close()
}

// LastErrorArgs are sys.lasterror's args: the namespace directory whose
// err view is read.
type LastErrorArgs struct{ Dir string }

// The kernel's signals.
var (
	SigSysSetup     = Signal[UserSignal]{Name: "sys.setup", Doc: "The system was set up: its first user."}
	SigUserAdded    = Signal[UserSignal]{Name: "sys.user.added", Doc: "A user was added."}
	SigConfigChange = Signal[ConfigChanged]{Name: "sys.config.changed", Doc: "A config key was set or unset."}
	SigTokenCreated = Signal[TokenCreated]{Name: "sys.token.created", Doc: "A token was made."}
	SigTokenRevoked = Signal[TokenRevoked]{Name: "sys.token.revoked", Doc: "A token was revoked."}
)

// SigEventsLost is the kernel's frame on a subscription that fell
// behind: how many records it dropped.
var SigEventsLost = Signal[EventsLost]{Name: "events.lost", Doc: "A subscription fell behind: records were dropped."}

// EventsLost is the payload of events.lost.
type EventsLost struct {
	Dropped uint64 `json:"dropped"`
}

// UserSignal is the payload of sys.setup and sys.user.added.
type UserSignal struct {
	Uid      uint32 `json:"uid"`
	Username string `json:"username"`
}

// ConfigChanged is the payload of sys.config.changed; Unset is set when
// the key was removed.
type ConfigChanged struct {
	Key   string `json:"key"`
	Unset bool   `json:"unset,omitempty"`
}

// TokenCreated is the payload of sys.token.created.
type TokenCreated struct {
	TokenID string `json:"tokenId"`
	Uid     uint32 `json:"uid"`
	Kind    string `json:"kind"`
}

// TokenRevoked is the payload of sys.token.revoked.
type TokenRevoked struct {
	TokenID string `json:"tokenId"`
}
