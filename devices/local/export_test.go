package local

import (
	"context"
	"time"
)

// Limits of shell.exec, for the external tests.
const (
	ShellKillGrace = shellKillGrace
	MaxShellOutput = maxShellOutput
)

// SetShellLimits sets the TTL of the device's shell jobs and the wait
// budget of a start or poll (zero: the default); call it before the
// device's first command.
func (d *Device) SetShellLimits(ttl, wait time.Duration) {
	d.shell.jobs.mu.Lock()
	d.shell.jobs.ttl, d.shell.jobs.wait = ttl, wait
	d.shell.jobs.mu.Unlock()
}

// SetSessionRetention sets how long an ended exec session (and the blobs
// its receipts hold) is kept; call it before the first session.
func (x *Sessions) SetSessionRetention(r time.Duration) {
	x.sessions.mu.Lock()
	x.sessions.retention = r
	x.sessions.mu.Unlock()
}

// Reown gives the data path rel and all beneath it their owners' disk
// ids, as the daemon's sweep does: for tests that make files on disk
// directly, as root.
func (d *Device) Reown(rel string) error { return d.reownTree(context.Background(), rel) }

// SetJanitorPeriod sets how often the sessions' janitor ends expired
// sessions; call it before the first session.
func (x *Sessions) SetJanitorPeriod(d time.Duration) {
	x.sessions.mu.Lock()
	x.sessions.janitorEvery = d
	x.sessions.mu.Unlock()
}

// ShellJobs returns the ids of the device's shell jobs, each with
// whether its command has ended, without reading or touching them.
func (d *Device) ShellJobs() map[string]bool {
	t := &d.shell.jobs
	t.mu.Lock()
	defer t.mu.Unlock()
	m := make(map[string]bool, len(t.jobs))
	for id, s := range t.jobs {
		s.mu.Lock()
		started := s.h != nil
		s.mu.Unlock()
		m[id] = started && s.ended()
	}
	return m
}
