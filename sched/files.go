package sched

// mountFiles adds /var/spool/cron and /var/log/gsv/scheduler.
func (m *Manager) mountFiles() {}
