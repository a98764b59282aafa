package devices

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/devices/local"
	"gsvfs.dev/gsvfs/kernel"
)

// Quotas from config: root sets config/quota/<kind> for every user and
// users/<uid>/quota/<kind> for one (which wins over the system's), each
// a size (local.ParseQuota: "512M", "10G", "none"). The kinds are home,
// tmp and output (local.Quota); a kind not set is local.DefaultQuota's.

// quotaKinds are the kinds of quota config keys.
var quotaKinds = []string{"home", "tmp", "output"}

// quotaTTL is how long a user's quota is kept before config is read
// again: a change applies within it.
const quotaTTL = time.Second

// quotas reads users' quotas from config, each kept quotaTTL.
type quotas struct {
	k *kernel.Kernel

	mu sync.Mutex
	m  map[uint32]quotaEntry
}

type quotaEntry struct {
	q   local.Quota
	err error
	at  time.Time
}

// of returns uid's quota. A value that does not parse is an error (the
// operation that asked fails), never no limit.
func (qs *quotas) of(ctx context.Context, uid uint32) (local.Quota, error) {
	now := time.Now()
	qs.mu.Lock()
	e, ok := qs.m[uid]
	qs.mu.Unlock()
	if ok && now.Sub(e.at) < quotaTTL {
		return e.q, e.err
	}
	q, err := qs.read(ctx, uid)
	if ctx.Err() != nil {
		return q, err // not kept: the caller went
	}
	qs.mu.Lock()
	if qs.m == nil {
		qs.m = map[uint32]quotaEntry{}
	}
	qs.m[uid] = quotaEntry{q, err, now}
	qs.mu.Unlock()
	return q, err
}

// read reads uid's quota from config.
func (qs *quotas) read(ctx context.Context, uid uint32) (local.Quota, error) {
	q := local.DefaultQuota
	vals := map[string]string{}
	for _, prefix := range []string{"config/quota/", fmt.Sprintf("users/%d/quota/", uid)} {
		res, err := kernel.Do(ctx, qs.k, qs.k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: prefix})
		if err != nil {
			return q, err
		}
		for _, e := range res.Entries {
			if kind, ok := strings.CutPrefix(e.Key, prefix); ok {
				vals[kind] = e.Key + "\x00" + e.Value // the user's, read last, wins
			}
		}
	}
	for _, kind := range quotaKinds {
		kv, ok := vals[kind]
		if !ok {
			continue
		}
		key, val, _ := strings.Cut(kv, "\x00")
		n, err := local.ParseQuota(val)
		if err != nil {
			return q, abi.E(abi.Path(key), abi.Other, err.Error())
		}
		switch kind {
		case "home":
			q.Home = n
		case "tmp":
			q.Tmp = n
		case "output":
			q.Output = n
		}
	}
	return q, nil
}
