// Package sched is the kernel scheduler: schedules that fire on a time
// expression and make a syscall of proc as their owner.
//
// # The room
//
// A Manager is a room of the namespace (ns.Room). Open migrates the
// store and prepares it; ns.Space.Add registers its syscall table
// (Syscalls), binds its files (Mounts) and calls Start, which reloads
// every enabled schedule (applying each one's misfire policy to what was
// missed while the daemon was down) and starts the engine. Close stops the
// engine and waits for the runs under way.
//
// # Syscalls
//
// sched.list, sched.add, sched.update, sched.remove, sched.run,
// sched.crontab.get, sched.crontab.set and sched.log take and return the
// types of abi/sched.go (abi.SchedAddArgs, abi.Schedule, abi.Run, ...).
// A non-root caller sees and changes only their own schedules; root may
// name an ownerUid. The Internal sched.ctl.run, sched.owners and
// sched.crontab.check serve the files.
//
// # Files
//
// /var/spool/cron holds one crontab per user (read renders the user's
// schedules, write reconciles them with the text: ParseCrontab,
// RenderCrontab), a ctl file (run, enable, disable, remove) and the err
// view; /var/log/gsv/scheduler is the run history as JSON lines, oldest
// first.
//
// # The engine
//
// A timer heap of each enabled schedule's next fire time, under one mutex
// (Manager.mu; functions named ...Locked need it held). The engine sleeps
// until the earliest time (at most a minute, so that a wall-clock jump is
// seen), then puts the due schedules in their owners' queues (fair.go),
// from which runs start owners in turn, at most maxRunning at once and
// maxRunningPerOwner target calls of one owner. A run makes its target syscall (process.spawn: proc.spawn;
// process.event: proc.send; process.lifecycle: proc.conversation.compact,
// .reset or proc.checkpoint) through the kernel's dispatcher as the
// schedule's run-as user, with proc's abi types: sched never imports proc.
// It is then recorded, with the schedule's next time, in one transaction.
// Cron expressions are matched by Cron, DST-safe, in their zone.
package sched
