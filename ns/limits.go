package ns

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// Limit is uid's value of a per-user limit of the configuration: the
// system's config/<name> (e.g. config/sched/max_schedules), overridden
// for one user by users/<uid>/<name> (only root may set either), else
// def. Each is read through the dispatcher (sys.config.get, as the
// kernel). A value that is not a non-negative integer is ignored, with a
// warning in log: a typo of root's never takes every user's limit away.
func Limit(ctx context.Context, k *kernel.Kernel, log *slog.Logger, uid uint32, name string, def int) int {
	n := def
	for _, key := range []string{"config/" + name, fmt.Sprintf("users/%d/%s", uid, name)} {
		res, err := kernel.Do(ctx, k, k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: key})
		if err != nil {
			continue
		}
		for _, e := range res.Entries {
			if e.Key != key {
				continue
			}
			v, err := strconv.ParseUint(strings.TrimSpace(e.Value), 10, 31)
			if err != nil {
				log.Warn("config: a limit that is not a non-negative integer is ignored", "key", key, "value", e.Value)
				continue
			}
			n = int(v)
		}
	}
	return n
}
