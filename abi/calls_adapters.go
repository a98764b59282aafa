package abi

import "strconv"

// The adapters room's syscalls (seed 003 adapter.*, sys.link*; seed 004
// identity links, surface routes): chat platforms reaching agents.
// adapter.inbound, adapter.state.update and the outbox calls are a
// bridge's, made with a service token bound to the adapter kind
// (Grant Adapters); the others are a user's.
var (
	AdapterInbound = Call[AdapterInboundArgs, *AdapterInboundResult]{Name: "adapter.inbound", Grant: Adapters,
		Doc: "A bridge hands in a message its account received: delivered to the linked user's process, a link challenge, or dropped."}
	AdapterStateUpdate = Call[AdapterStateArgs, *OKResult]{Name: "adapter.state.update", Grant: Adapters,
		Doc: "A bridge reports its account's state (connected, authenticated, last error)."}
	AdapterOutboxNext = Call[AdapterOutboxNextArgs, *AdapterOutboxNextResult]{Name: "adapter.outbox.next", Grant: Adapters,
		Doc: "A bridge takes the deliveries waiting for its account, waiting up to waitMs for one."}
	AdapterOutboxDone = Call[AdapterOutboxDoneArgs, *OKResult]{Name: "adapter.outbox.done", Grant: Adapters,
		Doc: "A bridge reports what became of a delivery it took: sent, failed, or ambiguous (never retried)."}
	AdapterStatus = Call[AdapterStatusArgs, *AdapterStatusResult]{Name: "adapter.status", Grant: Users | Adapters,
		Doc: "The last known state of an adapter kind's accounts (or every kind's) the caller may see."}
	AdapterSend = Call[AdapterSendArgs, *AdapterSendResult]{Name: "adapter.send", Grant: Users,
		Doc: "Sends text to a chat through an adapter account's bridge, at most once."}
	AdapterConnect = Call[AdapterAccountArgs, *AdapterAccountResult]{Name: "adapter.connect", Grant: Users,
		Doc: "Asks an account's bridge to connect to its platform."}
	AdapterDisconnect = Call[AdapterAccountArgs, *AdapterAccountResult]{Name: "adapter.disconnect", Grant: Users,
		Doc: "Asks an account's bridge to disconnect from its platform."}

	SysLink = Call[LinkArgs, *LinkResult]{Name: "sys.link", Grant: Users,
		Doc: "Links a platform actor (adapter, account, actor) to a user: the caller, or any uid for root."}
	SysUnlink = Call[UnlinkArgs, *UnlinkResult]{Name: "sys.unlink", Grant: Users,
		Doc: "Removes an identity link of the caller's (root: anyone's)."}
	SysLinkList = Call[LinkListArgs, *LinkListResult]{Name: "sys.link.list", Grant: Users,
		Doc: "The caller's identity links (root: everyone's, or uid's), newest first."}
	SysLinkConsume = Call[LinkConsumeArgs, *LinkResult]{Name: "sys.link.consume", Grant: Users,
		Doc: "Consumes a link code a bridge gave in a chat: links that chat's actor to the caller."}
)

// OKResult is the result of a call that answers only that it was done.
type OKResult struct {
	OK bool `json:"ok"`
}

// AdapterInboundArgs are adapter.inbound's args: the adapter kind (it
// must be the one the caller's token is bound to), the account that
// received the message, and the message.
type AdapterInboundArgs struct {
	Adapter   string         `json:"adapter"`
	AccountID string         `json:"accountId"`
	Message   AdapterMessage `json:"message"`
}

// AdapterInboundResult is adapter.inbound's result. Status says what
// became of the message: "delivered" (to Delivered's process),
// "replayed" (its id was seen: nothing was done), "challenge" (an
// unlinked DM: Challenge's code to give to gsv link), "command" (a chat
// command: Reply answers it), "approval" (it answered a pending
// approval) or "dropped" (DroppedReason). Reply, if set, is text the
// bridge posts to the chat at once.
type AdapterInboundResult struct {
	OK            bool              `json:"ok"`
	Status        string            `json:"status"`
	Delivered     *AdapterDelivered `json:"delivered,omitempty"`
	Reply         *AdapterReply     `json:"reply,omitempty"`
	Challenge     *LinkChallenge    `json:"challenge,omitempty"`
	DroppedReason string            `json:"droppedReason,omitempty"`
}

// AdapterDelivered is where an inbound message went: the linked user,
// the process and the run it started (or was queued for).
type AdapterDelivered struct {
	Uid    uint32 `json:"uid"`
	Pid    string `json:"pid"`
	RunID  string `json:"runId"`
	Queued bool   `json:"queued"`
}

// AdapterReply is text a bridge posts to the chat a message came from.
type AdapterReply struct {
	Text      string `json:"text"`
	ReplyToID string `json:"replyToId,omitempty"`
}

// LinkChallenge is a link code given to an unlinked actor: Code (as
// K7QF-29TD) is consumed by gsv link CODE before ExpiresAt (Unix ms).
type LinkChallenge struct {
	Code      string `json:"code"`
	Prompt    string `json:"prompt"`
	ExpiresAt int64  `json:"expiresAt"`
}

// AdapterStateArgs are adapter.state.update's args.
type AdapterStateArgs struct {
	Adapter   string               `json:"adapter"`
	AccountID string               `json:"accountId"`
	Status    AdapterAccountStatus `json:"status"`
}

// AdapterOutboxNextArgs are adapter.outbox.next's args: the bridge's
// account, its session (an id the bridge process picks once: a
// delivery another session took and never reported is ambiguous), and
// how long to wait for a delivery (at most a minute).
type AdapterOutboxNextArgs struct {
	Adapter   string `json:"adapter"`
	AccountID string `json:"accountId"`
	Session   string `json:"session"`
	WaitMs    int64  `json:"waitMs,omitempty"`
}

// AdapterOutboxNextResult is adapter.outbox.next's result: the
// deliveries the bridge now holds (durable: report each with
// adapter.outbox.done), the stream updates (not durable: the text so far
// of a reply being written, for a platform that edits), and Want, the
// account's wanted state ("connect" or "disconnect").
type AdapterOutboxNextResult struct {
	Deliveries []AdapterDelivery `json:"deliveries"`
	Streams    []AdapterStream   `json:"streams,omitempty"`
	Want       string            `json:"want"`
}

// AdapterDelivery is one message of the outbound ledger: DeliveryID is
// its key, Fingerprint the SHA-256 of its content; StreamKey, if set,
// names the stream (a run) whose message this final text replaces.
type AdapterDelivery struct {
	DeliveryID  string         `json:"deliveryId"`
	Fingerprint string         `json:"fingerprint"`
	Surface     AdapterSurface `json:"surface"`
	Text        string         `json:"text"`
	Media       []MediaInput   `json:"media,omitempty"`
	ReplyToID   string         `json:"replyToId,omitempty"`
	StreamKey   string         `json:"streamKey,omitempty"`
}

// AdapterStream is the text so far of a reply being written (a run's
// answer as the model streams it), for a bridge whose platform edits a
// posted message.
type AdapterStream struct {
	StreamKey string         `json:"streamKey"`
	Surface   AdapterSurface `json:"surface"`
	Text      string         `json:"text"`
	ReplyToID string         `json:"replyToId,omitempty"`
}

// AdapterOutboxDoneArgs are adapter.outbox.done's args: MessageIDs are
// the platform's ids of what was posted; Error, if set, says why it
// failed; Ambiguous says the message may or may not have been posted.
type AdapterOutboxDoneArgs struct {
	Adapter    string   `json:"adapter"`
	AccountID  string   `json:"accountId"`
	DeliveryID string   `json:"deliveryId"`
	MessageIDs []string `json:"messageIds,omitempty"`
	Error      string   `json:"error,omitempty"`
	Ambiguous  bool     `json:"ambiguous,omitempty"`
}

// AdapterStatusArgs are adapter.status's args: Adapter "" is every kind.
type AdapterStatusArgs struct {
	Adapter   string `json:"adapter,omitempty"`
	AccountID string `json:"accountId,omitempty"`
}

// AdapterStatusResult is adapter.status's result, newest activity first.
type AdapterStatusResult struct {
	Adapter  string                 `json:"adapter"`
	Accounts []AdapterAccountRecord `json:"accounts"`
}

// AdapterAccountRecord is one account's status as the kernel keeps it:
// the bridge's last report, what its owner wants, and the ledger's
// counts (deliveries pending, sent, failed, ambiguous).
type AdapterAccountRecord struct {
	AdapterAccountStatus
	Adapter     string         `json:"adapter"`
	OwnerUid    uint32         `json:"ownerUid"`
	Want        string         `json:"want"`
	UpdatedAt   int64          `json:"updatedAt"`
	LastMessage int64          `json:"lastMessage,omitempty"`
	Ledger      map[string]int `json:"ledger"`
}

// AdapterSendArgs are adapter.send's args. DeliveryID (ours), if set, is
// the ledger's key: a second send with it does nothing (and one with
// other content is a 409).
type AdapterSendArgs struct {
	Adapter    string         `json:"adapter"`
	AccountID  string         `json:"accountId"`
	Surface    AdapterSurface `json:"surface"`
	Text       string         `json:"text"`
	ReplyToID  string         `json:"replyToId,omitempty"`
	Media      []MediaInput   `json:"media,omitempty"`
	DeliveryID string         `json:"deliveryId,omitempty"`
}

// AdapterSendResult is adapter.send's result: State is the delivery's
// ("pending" while no bridge has taken it within the wait, "sent",
// "failed", "ambiguous"); MessageID is the platform's id when sent.
type AdapterSendResult struct {
	OK         bool   `json:"ok"`
	Adapter    string `json:"adapter"`
	AccountID  string `json:"accountId"`
	SurfaceID  string `json:"surfaceId"`
	DeliveryID string `json:"deliveryId"`
	State      string `json:"state"`
	MessageID  string `json:"messageId,omitempty"`
	Error      string `json:"error,omitempty"`
}

// AdapterAccountArgs name one account of an adapter kind.
type AdapterAccountArgs struct {
	Adapter   string `json:"adapter"`
	AccountID string `json:"accountId"`
}

// AdapterAccountResult is adapter.connect's and .disconnect's result:
// the account's wanted state, which its bridge reads.
type AdapterAccountResult struct {
	OK        bool   `json:"ok"`
	Adapter   string `json:"adapter"`
	AccountID string `json:"accountId"`
	Want      string `json:"want"`
	Message   string `json:"message,omitempty"`
}

// Link is an identity link: the platform actor ActorID of an adapter
// account is the user Uid.
type Link struct {
	Adapter     string `json:"adapter"`
	AccountID   string `json:"accountId"`
	ActorID     string `json:"actorId"`
	Uid         uint32 `json:"uid"`
	CreatedAt   int64  `json:"createdAt"`
	LinkedByUid uint32 `json:"linkedByUid"`
}

// LinkArgs are sys.link's args: Uid (root only) is whose link it is.
type LinkArgs struct {
	Adapter   string  `json:"adapter"`
	AccountID string  `json:"accountId"`
	ActorID   string  `json:"actorId"`
	Uid       *uint32 `json:"uid,omitempty"`
}

// LinkResult is sys.link's and sys.link.consume's result.
type LinkResult struct {
	Linked bool  `json:"linked"`
	Link   *Link `json:"link,omitempty"`
}

// UnlinkArgs are sys.unlink's args.
type UnlinkArgs struct {
	Adapter   string `json:"adapter"`
	AccountID string `json:"accountId"`
	ActorID   string `json:"actorId"`
}

// UnlinkResult is sys.unlink's result.
type UnlinkResult struct {
	Removed bool `json:"removed"`
}

// LinkListArgs are sys.link.list's args: Uid (root only) narrows it.
type LinkListArgs struct {
	Uid *uint32 `json:"uid,omitempty"`
}

// LinkListResult is sys.link.list's result, newest first; never null.
type LinkListResult struct {
	Links []Link `json:"links"`
}

// LinkConsumeArgs are sys.link.consume's args.
type LinkConsumeArgs struct {
	Code string `json:"code"`
}

// MaxAdapterKind is the longest adapter kind name.
const MaxAdapterKind = 32

// CheckAdapterKind checks an adapter kind's name: 1 to MaxAdapterKind
// lowercase letters, digits, '-' or '_', starting with a letter
// ("telegram", "irc", "webhook").
func CheckAdapterKind(kind string) error {
	if kind == "" || len(kind) > MaxAdapterKind || kind[0] < 'a' || kind[0] > 'z' {
		return E(Invalid, "adapter kind "+quoteShort(kind)+": want 1 to 32 lowercase letters, digits, - or _, starting with a letter")
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return E(Invalid, "adapter kind "+quoteShort(kind)+": want 1 to 32 lowercase letters, digits, - or _, starting with a letter")
		}
	}
	return nil
}

// quoteShort quotes s, cut to 40 bytes, for an error message.
func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}
