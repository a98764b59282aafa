package kernel

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// lastErrorsKept is how many internal errors sys.status shows.
const lastErrorsKept = 10

// internalErrors are the last internal errors (code >= 500) the
// dispatcher returned, oldest first.
type internalErrors struct {
	mu   sync.Mutex
	errs []abi.DaemonError
}

func (e *internalErrors) note(name string, code int, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, abi.DaemonError{Time: time.Now().UnixMilli(), Syscall: name, Code: code, Error: err.Error()})
	if len(e.errs) > lastErrorsKept {
		e.errs = e.errs[len(e.errs)-lastErrorsKept:]
	}
}

func (e *internalErrors) list() []abi.DaemonError {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]abi.DaemonError{}, e.errs...)
}

// status serves sys.status. The devices, runs and scheduler queue come
// from their rooms' syscalls, made as the kernel (reads), the adapter
// accounts from adapter.status made as the caller; a room that is not
// there leaves its part zero.
func (k *Kernel) status(ctx context.Context, c *Caller, _ *abi.DaemonStatusArgs) (*abi.DaemonStatus, error) {
	r := &abi.DaemonStatus{Version: abi.BuildVersion(), UptimeMs: k.Uptime().Milliseconds(), LastErrors: k.ierrs.list()}
	for _, f := range []string{"gsv.db", "gsv.db-wal"} {
		if st, err := os.Stat(filepath.Join(k.cfg.StateDir, f)); err == nil {
			r.StoreBytes += st.Size()
		}
	}
	kc := k.KernelCaller()
	if d, err := Do(ctx, k, kc, abi.SysDeviceList, nil); err == nil {
		r.DevicesTotal = len(d.Devices)
		for _, dv := range d.Devices {
			if dv.Online {
				r.DevicesOnline++
			}
		}
	}
	if runs, err := Do(ctx, k, kc, abi.ProcRunList, nil); err == nil {
		r.RunsActive = len(runs.Runs)
	}
	if st, err := Do(ctx, k, kc, abi.SchedStats, nil); err == nil {
		r.SchedQueued, r.SchedRunning = st.Queued, st.Running
	}
	r.Adapters = []abi.DaemonAdapter{}
	// The adapter accounts the caller may see (adapter.status as the
	// caller: root every one, a user their own and those linked to them).
	if st, err := Do(ctx, k, c, abi.AdapterStatus, nil); err == nil {
		for _, a := range st.Accounts {
			pending := a.Ledger["pending"]
			r.OutboxPending += pending
			r.Adapters = append(r.Adapters, abi.DaemonAdapter{Adapter: a.Adapter, AccountID: a.AccountID, Online: a.Connected,
				Want: a.Want, LastActivity: max(a.LastActivity, a.UpdatedAt), Error: a.Error, Pending: pending})
		}
	}
	if k.audit != nil {
		r.AuditPending = k.audit.npending.Load()
	}
	return r, nil
}
