package abi

// The notify room's syscalls (notification.*) and signals.
var (
	NotificationCreate = Call[NotificationCreateArgs, *NotificationCreateResult]{Name: "notification.create", Grant: Users,
		Doc: "Makes a notification for the caller."}
	NotificationList = Call[NotificationListArgs, *NotificationListResult]{Name: "notification.list", Grant: Users,
		Doc: "The caller's live notifications, newest first."}
	NotificationMarkRead = Call[NotificationIDArgs, *NotificationResult]{Name: "notification.mark_read", Grant: Users,
		Doc: "Marks one of the caller's notifications read."}
	NotificationDismiss = Call[NotificationIDArgs, *NotificationResult]{Name: "notification.dismiss", Grant: Users,
		Doc: "Dismisses one of the caller's notifications."}
	NotificationFiles = Call[NotificationFilesArgs, []Notification]{Name: "notification.files", Grant: Users, Flags: Internal,
		Doc: "The live, undismissed notifications of a user's /var/notify directory (its user's, or root's)."}
	NotificationFile = Call[NotificationFilesArgs, *Notification]{Name: "notification.file", Grant: Users, Flags: Internal,
		Doc: "One notification of a user's /var/notify directory (its user's, or root's)."}
)

// NotificationFilesArgs are the args of the Internal notification.files
// and notification.file: the user whose directory is read, and, for
// notification.file, the notification.
type NotificationFilesArgs struct {
	Uid uint32
	ID  string
}
