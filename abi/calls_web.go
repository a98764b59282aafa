package abi

// The WebSocket protocol's own calls (seed 003, sys.connect; the web
// console, docs/web.md). They are not in the kernel's table: the
// WebSocket gateway (package web) answers them itself, before (connect)
// or beside (cancel) the dispatcher, which serves every other request
// frame of a connection.
var (
	SysConnect = Call[ConnectArgs, *ConnectResult]{Name: "sys.connect", Flags: Internal | BeforeSetup,
		Doc: "The first request on a WebSocket connection: authenticates it and returns its identity and syscalls."}
	RequestCancel = Call[RequestCancelArgs, *RequestCancelResult]{Name: "request.cancel", Flags: Internal,
		Doc: "Cancels an in-flight request of the same WebSocket connection by its id."}
)

// ProtocolVersion is the WebSocket protocol's version: sys.connect's
// protocol must be it.
const ProtocolVersion = 2

// The WebSocket protocol's error codes (seed 003): a sys.connect with
// another protocol version (CodeProtocol), a role the credentials do not
// carry (CodeRole), credentials that do not authenticate (CodeAuth), and
// a system not set up yet (SetupRequired, 425, with Next "sys.setup").
const (
	CodeProtocol = 102
	CodeRole     = 103
	CodeAuth     = 401
)

// ConnectArgs are sys.connect's args (seed 003).
type ConnectArgs struct {
	Protocol int           `json:"protocol"`
	Client   ConnectClient `json:"client"`
	Driver   *struct {
		Implements []string `json:"implements"`
	} `json:"driver,omitempty"`
	Auth *ConnectAuth `json:"auth,omitempty"`
}

// ConnectClient names the connecting client and the role it connects
// as: "user", "driver" or "service".
type ConnectClient struct {
	ID       string `json:"id"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
	Role     string `json:"role"`
	Channel  string `json:"channel,omitempty"`
}

// ConnectAuth are sys.connect's credentials: a token (a user, service or
// node token). Without one, a browser's session cookie is used.
type ConnectAuth struct {
	Username string `json:"username"`
	Password string `json:"password,omitempty"`
	Token    string `json:"token,omitempty"`
}

// ConnectResult is sys.connect's result.
type ConnectResult struct {
	Protocol int           `json:"protocol"`
	Server   ConnectServer `json:"server"`
	Identity *Identity     `json:"identity"`
	Syscalls []string      `json:"syscalls"`
	Signals  []string      `json:"signals"`
}

// ConnectServer is the server's version and the connection's id.
type ConnectServer struct {
	Version      string `json:"version"`
	ConnectionID string `json:"connectionId"`
}

// RequestCancelArgs are request.cancel's args: the id of the request to
// cancel.
type RequestCancelArgs struct {
	ID string `json:"id"`
}

// RequestCancelResult says whether a request of that id was in flight.
type RequestCancelResult struct {
	Cancelled bool `json:"cancelled"`
}
