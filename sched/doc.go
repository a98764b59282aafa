// Package sched is the kernel scheduler: sched.* syscalls,
// /var/spool/cron crontabs and the run history, with a timer-heap engine
// and a DST-safe cron matcher (cron.go).
package sched
