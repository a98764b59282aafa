package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
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

// statusCollector reads sys.status (as the kernel: a read) at each
// scrape for what the rooms keep: the adapter accounts by whether they
// are online, and the queues' depths.
type statusCollector struct {
	k                                  *kernel.Kernel
	adapters, outbox, queued, schedRun *prometheus.Desc
}

func newStatusCollector(k *kernel.Kernel) *statusCollector {
	return &statusCollector{k: k,
		adapters: prometheus.NewDesc("gsv_adapter_accounts", "Chat adapter accounts, by whether their bridge reports them connected.", []string{"online"}, nil),
		outbox:   prometheus.NewDesc("gsv_adapter_outbox_pending", "Adapter deliveries waiting for a bridge to take them.", nil, nil),
		queued:   prometheus.NewDesc("gsv_schedule_queued", "Schedule runs due and waiting for a slot.", nil, nil),
		schedRun: prometheus.NewDesc("gsv_schedule_running", "Schedule runs under way.", nil, nil),
	}
}

func (s *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- s.adapters
	ch <- s.outbox
	ch <- s.queued
	ch <- s.schedRun
}

func (s *statusCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := kernel.Do(ctx, s.k, s.k.KernelCaller(), abi.SysStatus, nil)
	if err != nil {
		return
	}
	var on, off float64
	for _, a := range st.Adapters {
		if a.Online {
			on++
		} else {
			off++
		}
	}
	ch <- prometheus.MustNewConstMetric(s.adapters, prometheus.GaugeValue, on, "true")
	ch <- prometheus.MustNewConstMetric(s.adapters, prometheus.GaugeValue, off, "false")
	ch <- prometheus.MustNewConstMetric(s.outbox, prometheus.GaugeValue, float64(st.OutboxPending))
	ch <- prometheus.MustNewConstMetric(s.queued, prometheus.GaugeValue, float64(st.SchedQueued))
	ch <- prometheus.MustNewConstMetric(s.schedRun, prometheus.GaugeValue, float64(st.SchedRunning))
}
