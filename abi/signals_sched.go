package abi

// The scheduler's signals, each to the schedule's owner.
var (
	SigSchedChanged = Signal[SchedChanged]{Name: "sched.changed",
		Doc: "A schedule was added, updated or removed."}
	SigSchedRunFinished = Signal[SchedRunFinished]{Name: "sched.run.finished",
		Doc: "A run of a schedule ended."}
)

// SchedChanged is the payload of sched.changed: the schedule and the
// change ("added", "updated", "removed").
type SchedChanged struct {
	Change     string `json:"change"`
	ScheduleID string `json:"scheduleId"`
}

// SchedRunFinished is the payload of sched.run.finished: the schedule,
// its name, the run's status ("ok", "error", "skipped") and its error
// ("" if none). LatenessMs, for a run the engine fired, is how long after
// its due time it started (a one-shot's retry counts from its
// occurrence); absent for a run made by hand (sched.run) or skipped.
type SchedRunFinished struct {
	Error      string `json:"error"`
	Name       string `json:"name"`
	ScheduleID string `json:"scheduleId"`
	Status     string `json:"status"`
	LatenessMs *int64 `json:"latenessMs,omitempty"`
}
