package abi

import "encoding/json"

// The sys domain: identity, users, groups, tokens, configuration and
// setup (seed 003, sys.*). The kernel serves these.
//
// Result structs whose JSON was once built as a map list their fields in
// the map's (sorted) key order, so that the bytes on the wire stay the
// same.

// Identity is who a caller is, as sys.setup reports the first user: the
// seed's ProcessIdentity plus the role and capabilities of its
// connection.
type Identity struct {
	Role         string   `json:"role"`
	Uid          uint32   `json:"uid"`
	Gid          uint32   `json:"gid"`
	Gids         []uint32 `json:"gids"`
	Username     string   `json:"username"`
	Home         string   `json:"home"`
	Cwd          string   `json:"cwd"`
	WorkspaceID  *string  `json:"workspaceId"`
	Capabilities []string `json:"capabilities"`
}

// ProcessIdentity is the seed's ProcessIdentity: the uid, groups, home
// and working directory a caller acts with.
type ProcessIdentity struct {
	Cwd         string   `json:"cwd"`
	Gid         uint32   `json:"gid"`
	Gids        []uint32 `json:"gids"`
	Home        string   `json:"home"`
	Uid         uint32   `json:"uid"`
	Username    string   `json:"username"`
	WorkspaceID *string  `json:"workspaceId"`
}

// WhoamiArgs are sys.whoami's args: none.
type WhoamiArgs struct{}

// WhoamiResult is sys.whoami's result: the caller's role, process
// identity and capabilities.
type WhoamiResult struct {
	Capabilities []string        `json:"capabilities"`
	Process      ProcessIdentity `json:"process"`
	Role         string          `json:"role"`
}

// SyscallListArgs are sys.syscall.list's args: none.
type SyscallListArgs struct{}

// SyscallListResult is sys.syscall.list's result: the names of the
// syscalls the caller may make with a request frame, sorted.
type SyscallListResult struct {
	Syscalls []string `json:"syscalls"`
}

// SetupArgs are sys.setup's args. Username (with HostUID, the host user
// that acts as it) becomes the first user; empty, "root" or host uid 0
// means root is the first user. Timezone and AI, if given, are written to
// config/system/timezone and config/ai/*.
type SetupArgs struct {
	Username string   `json:"username,omitempty"`
	HostUID  *int     `json:"hostUid,omitempty"`
	Timezone string   `json:"timezone,omitempty"`
	AI       *SetupAI `json:"ai,omitempty"`
}

// SetupAI is the AI configuration sys.setup may write; empty fields are
// left as they are.
type SetupAI struct {
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	APIKey   string `json:"apiKey,omitempty"`
}

// SetupResult is sys.setup's result: the first user's identity; the root
// account is locked (it acts only through its host uid 0).
type SetupResult struct {
	RootLocked bool      `json:"rootLocked"`
	User       *Identity `json:"user"`
}

// User is a user record, as /etc/passwd shows it. HostUID is the host
// uid that acts as the user over FUSE and the 9P unix socket, or null.
type User struct {
	Uid      uint32 `json:"uid"`
	Gid      uint32 `json:"gid"`
	Username string `json:"username"`
	Home     string `json:"home"`
	Gecos    string `json:"gecos"`
	HostUID  *int   `json:"hostUid"`
	Created  int64  `json:"createdAt"`
}

// Group is a group record, as /etc/group shows it. Members is never
// null.
type Group struct {
	Gid     uint32   `json:"gid"`
	Name    string   `json:"name"`
	Members []string `json:"members"`
}

// UserAddArgs are sys.user.add's args (root only). Uid, if given, is in
// 1000-60000; else the next free uid from 1000 is taken. The result is
// the new *User.
type UserAddArgs struct {
	Username string `json:"username"`
	HostUID  *int   `json:"hostUid,omitempty"`
	Gecos    string `json:"gecos,omitempty"`
	Uid      *int   `json:"uid,omitempty"`
}

// UserListArgs are sys.user.list's args: none.
type UserListArgs struct{}

// UserListResult is sys.user.list's result: every user, by uid.
type UserListResult struct {
	Users []User `json:"users"`
}

// GroupListArgs are sys.group.list's args: none.
type GroupListArgs struct{}

// GroupListResult is sys.group.list's result: every group, by gid.
type GroupListResult struct {
	Groups []Group `json:"groups"`
}

// Token is a token's metadata. The raw value (Token) is shown only in
// sys.token.create's result; LastUsedAt, RevokedAt and RevokedReason are
// null until set. Times are Unix milliseconds.
type Token struct {
	TokenID         string  `json:"tokenId"`
	Token           string  `json:"token,omitempty"`
	TokenPrefix     string  `json:"tokenPrefix"`
	Uid             uint32  `json:"uid"`
	Kind            string  `json:"kind"`
	Label           *string `json:"label"`
	AllowedRole     *string `json:"allowedRole"`
	AllowedDeviceID *string `json:"allowedDeviceId"`
	// AllowedAdapter (ours) binds a service token to one chat adapter
	// kind: its holder makes only the adapter bridge's syscalls, for
	// that kind (docs/adapters.md).
	AllowedAdapter *string `json:"allowedAdapter,omitempty"`
	CreatedAt      int64   `json:"createdAt"`
	LastUsedAt     *int64  `json:"lastUsedAt"`
	ExpiresAt      *int64  `json:"expiresAt"`
	RevokedAt      *int64  `json:"revokedAt"`
	RevokedReason  *string `json:"revokedReason"`
	// Process narrows the owner's process capability for whoever
	// attaches with the token; nil narrows nothing.
	Process *ProcessCap `json:"process,omitempty"`
}

// TokenCreateArgs are sys.token.create's args. Kind is "user",
// "service" or "node"; Uid (root only) is whose token it is, the caller's
// by default; AllowedRole, if given, must be the kind's role;
// AllowedDeviceID binds a node token to a device; AllowedAdapter
// (ours) binds a service token to a chat adapter kind; ExpiresAt (Unix ms) is
// in the future. Process, if given, narrows the owner's process
// capability for the token's holder (see docs/sessions.md).
type TokenCreateArgs struct {
	Uid             *uint32     `json:"uid,omitempty"`
	Kind            string      `json:"kind"`
	Label           *string     `json:"label,omitempty"`
	AllowedRole     *string     `json:"allowedRole,omitempty"`
	AllowedDeviceID *string     `json:"allowedDeviceId,omitempty"`
	AllowedAdapter  *string     `json:"allowedAdapter,omitempty"`
	ExpiresAt       *int64      `json:"expiresAt,omitempty"`
	Process         *ProcessCap `json:"process,omitempty"`
}

// TokenCreateResult is sys.token.create's result: the new token, with
// its raw value.
type TokenCreateResult struct {
	Token *Token `json:"token"`
}

// TokenListArgs are sys.token.list's args: Uid (root only) narrows the
// list to one user's tokens; others see only their own.
type TokenListArgs struct {
	Uid *uint32 `json:"uid,omitempty"`
}

// TokenListResult is sys.token.list's result, oldest first; never null.
type TokenListResult struct {
	Tokens []Token `json:"tokens"`
}

// TokenRevokeArgs are sys.token.revoke's args. Root may revoke anyone's
// token, others only their own.
type TokenRevokeArgs struct {
	TokenID string  `json:"tokenId"`
	Reason  *string `json:"reason,omitempty"`
	Uid     *uint32 `json:"uid,omitempty"`
}

// TokenRevokeResult is sys.token.revoke's result: false if no active
// token of the caller's had that id.
type TokenRevokeResult struct {
	Revoked bool `json:"revoked"`
}

// ConfigEntry is one config key and its value.
type ConfigEntry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// ConfigGetArgs are sys.config.get's args: a key, or a prefix ending in
// "/" (or "" for every visible key). A dotted key ("ai.provider") means
// config/ai/provider, or the caller's own users/<uid>/ai/ override if
// there is one.
type ConfigGetArgs struct {
	Key string `json:"key,omitempty"`
}

// ConfigGetResult is sys.config.get's result: the visible entries, by
// key; never null.
type ConfigGetResult struct {
	Entries []ConfigEntry `json:"entries"`
}

// ConfigSetArgs are sys.config.set's args. Value is any JSON value; a
// string is stored as it is, anything else as its JSON text.
type ConfigSetArgs struct {
	Key   string          `json:"key"`
	Value json.RawMessage `json:"value"`
}

// ConfigUnsetArgs are sys.config.unset's args: the key to remove (a
// dotted key names the key sys.config.set would set).
type ConfigUnsetArgs struct {
	Key string `json:"key"`
}

// ConfigSetResult is sys.config.set's (and sys.config.unset's) result.
type ConfigSetResult struct {
	OK bool `json:"ok"`
}
