package abi

// The notification domain: per-user notifications (seed 003
// notification.*). The notify room serves these; the CLI calls them with
// these types.

// NotificationAction is a button a notification offers: Kind says what it
// does (the client's business), Label is what it shows, Target and Args
// what it acts on.
type NotificationAction struct {
	Kind   string         `json:"kind"`
	Label  string         `json:"label"`
	Target string         `json:"target,omitempty"`
	Args   map[string]any `json:"args,omitempty"`
}

// NotificationSource is who made a notification: Kind "user" (the user
// themself), or "process" with the ProcessID of the process that acted
// for them.
type NotificationSource struct {
	Kind      string `json:"kind"`
	ProcessID string `json:"processId,omitempty"`
}

// Notification is the seed's NotificationRecord. Times are Unix
// milliseconds; ReadAt, DismissedAt and ExpiresAt are null until set.
// Level is "info", "success", "warning" or "error". Actions is never null.
type Notification struct {
	NotificationID string               `json:"notificationId"`
	Title          string               `json:"title"`
	Body           string               `json:"body,omitempty"`
	Level          string               `json:"level"`
	CreatedAt      int64                `json:"createdAt"`
	ReadAt         *int64               `json:"readAt"`
	DismissedAt    *int64               `json:"dismissedAt"`
	ExpiresAt      *int64               `json:"expiresAt"`
	Actions        []NotificationAction `json:"actions"`
	Source         NotificationSource   `json:"source"`
}

// NotificationCreateArgs are notification.create's args. Level defaults
// to "info"; TtlMs, the time until an unread notification expires,
// defaults to 30 days and is clamped to 1 second through 90 days.
type NotificationCreateArgs struct {
	Title   string               `json:"title"`
	Body    string               `json:"body,omitempty"`
	Level   string               `json:"level,omitempty"`
	Actions []NotificationAction `json:"actions,omitempty"`
	TtlMs   *int64               `json:"ttlMs,omitempty"`
}

// NotificationCreateResult is notification.create's result.
type NotificationCreateResult struct {
	Notification *Notification `json:"notification"`
}

// NotificationListArgs are notification.list's args: IncludeRead defaults
// to true, IncludeDismissed to false, Limit to 100 (clamped to 1-500).
type NotificationListArgs struct {
	IncludeRead      *bool `json:"includeRead,omitempty"`
	IncludeDismissed *bool `json:"includeDismissed,omitempty"`
	Limit            *int  `json:"limit,omitempty"`
}

// NotificationListResult is notification.list's result, newest first.
type NotificationListResult struct {
	Notifications []Notification `json:"notifications"`
}

// NotificationIDArgs name one of the caller's notifications
// (notification.mark_read, notification.dismiss).
type NotificationIDArgs struct {
	NotificationID string `json:"notificationId"`
}

// NotificationResult is the result of notification.mark_read and
// notification.dismiss: the notification as it now is, or null when the
// caller has no live notification of that id.
type NotificationResult struct {
	Notification *Notification `json:"notification"`
}
