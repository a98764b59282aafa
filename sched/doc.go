// Package sched will hold the kernel scheduler: sched.* syscalls,
// /var/spool/cron crontabs and the run history. Nothing is implemented yet;
// see the project's scheduler issue.
package sched
