package abi

// The notify room's signals, each to the notification's owner.
var (
	SigNotificationCreated = Signal[NotificationSignal]{Name: "notification.created",
		Doc: "A notification was made."}
	SigNotificationUpdated = Signal[NotificationSignal]{Name: "notification.updated",
		Doc: "A notification was read."}
	SigNotificationDismissed = Signal[NotificationSignal]{Name: "notification.dismissed",
		Doc: "A notification was dismissed."}
)

// NotificationSignal is the payload of the notification.* signals: the
// notification as it now is.
type NotificationSignal struct {
	Notification *Notification `json:"notification"`
}
