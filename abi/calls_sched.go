package abi

// The scheduler's syscalls (sched.*) and signals.
var (
	SchedList = Call[SchedListArgs, *SchedListResult]{Name: "sched.list", Grant: Users,
		Doc: "The caller's schedules (root: everyone's, or ownerUid's), enabled ones unless includeDisabled."}
	SchedAdd = Call[SchedAddArgs, *ScheduleResult]{Name: "sched.add", Grant: Users,
		Doc: "Adds a schedule: a cron, interval or one-shot expression and the process syscall it makes, as the caller."}
	SchedUpdate = Call[SchedUpdateArgs, *ScheduleResult]{Name: "sched.update", Grant: Users,
		Doc: "Changes the fields of a schedule (by id or name) that its patch gives."}
	SchedRemove = Call[SchedIDArgs, *SchedRemoveResult]{Name: "sched.remove", Grant: Users,
		Doc: "Removes a schedule (by id or name)."}
	SchedRun = Call[SchedRunArgs, *SchedRunResult]{Name: "sched.run", Grant: Users,
		Doc: "Runs a schedule now (mode force, even disabled), or the caller's schedules that are due (mode due)."}
	SchedCtlRun = Call[SchedRunArgs, *SchedRunResult]{Name: "sched.ctl.run", Grant: Users, Flags: Internal,
		Doc: "sched.run as a line of /var/spool/cron/ctl makes it (run <id>, run due)."}
	SchedOwners = Call[struct{}, []uint32]{Name: "sched.owners", Grant: Users, Flags: Internal,
		Doc: "The uids whose crontabs the caller sees in /var/spool/cron: everyone's with schedules for root, its own otherwise."}
	SchedCrontabGet = Call[CrontabGetArgs, *CrontabGetResult]{Name: "sched.crontab.get", Grant: Users,
		Doc: "The caller's (root: ownerUid's) schedules as a crontab."}
	SchedCrontabSet = Call[CrontabSetArgs, *CrontabSetResult]{Name: "sched.crontab.set", Grant: Users,
		Doc: "Makes the caller's (root: ownerUid's) schedules those of a crontab's text: adds, updates and removes."}
	SchedCrontabCheck = Call[CrontabCheckArgs, int]{Name: "sched.crontab.check", Grant: Users, Flags: Internal,
		Doc: "Checks complete crontab lines as a crontab file is written and answers how many are schedules."}
	SchedLog = Call[SchedLogArgs, *SchedLogResult]{Name: "sched.log", Grant: Users,
		Doc: "The caller's (root: everyone's, or ownerUid's) latest runs, newest first."}
	SchedStats = Call[struct{}, *SchedStatsResult]{Name: "sched.stats", Flags: KernelOnly | Internal | Read,
		Doc: "The scheduler's queue: runs due and waiting for a slot, runs under way (sys.status)."}
)

// SchedStatsResult is sched.stats's result: the engine's queue depth
// (Queued: runs due and waiting for a slot) and its runs under way.
type SchedStatsResult struct {
	Queued  int `json:"queued"`
	Running int `json:"running"`
}

// CrontabCheckArgs are sched.crontab.check's args: complete lines of a
// crontab, the first of them line number Line, written to OwnerUid's
// crontab after Before schedule lines.
type CrontabCheckArgs struct {
	Text     string
	Line     int
	OwnerUid uint32
	Before   int
}
