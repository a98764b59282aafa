package telemetry

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// requestCounter counts one transport's requests by operation and
// result: gsv_9p_requests_total, gsv_fuse_requests_total.
type requestCounter struct {
	vec *prometheus.CounterVec
	ops sync.Map // op -> *[2]prometheus.Counter (ok, error)
}

func newRequestCounter(name, help string) *requestCounter {
	return &requestCounter{vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"op", "result"})}
}

// count is the transport's request hook (vfs.RequestHook): a request of
// op answered, failed or not. The ops are the transport's few message
// types, so the children are looked up once each.
func (r *requestCounter) count(op string, failed bool) {
	v, ok := r.ops.Load(op)
	if !ok {
		v, _ = r.ops.LoadOrStore(op, &[2]prometheus.Counter{r.vec.WithLabelValues(op, "ok"), r.vec.WithLabelValues(op, "error")})
	}
	i := 0
	if failed {
		i = 1
	}
	v.(*[2]prometheus.Counter)[i].Inc()
}

// NinePRequests is the 9P server's request hook (ninep.Server.OnRequest):
// gsv_9p_requests_total{op,result}.
func (t *Telemetry) NinePRequests(op string, failed bool) { t.ninep.count(op, failed) }

// FUSERequests is the FUSE mount's request hook (fusefs.Options.OnRequest):
// gsv_fuse_requests_total{op,result}.
func (t *Telemetry) FUSERequests(op string, failed bool) { t.fuse.count(op, failed) }
