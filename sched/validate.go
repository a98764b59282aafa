package sched

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// maxPayload is the most bytes of a package.event's JSON payload.
const maxPayload = 64 << 10

// oneShot says whether e fires once.
func oneShot(e abi.Expression) bool { return e.Kind == "at" || e.Kind == "after" }

// Limits of expressions and policies. No expression fires more often than
// once a MinEveryMs, and every time an expression names or spans lies
// within HorizonMs of now: together with the saturating arithmetic of
// nextAfter, no value can make a schedule fire in a loop.
const (
	// MinEveryMs is the shortest interval of an every schedule (1 s).
	MinEveryMs = 1000
	// HorizonMs is the farthest an expression reaches (100 years): the
	// largest everyMs and afterMs, and how far from now atMs and anchorMs
	// may be.
	HorizonMs = 100 * 36525 * 24 * 3600 * 10 // 100 × 365.25 days, in ms
	// MaxRetryAttempts is the most attempts a retry policy may make.
	MaxRetryAttempts = 10
	// MaxRetryMs is the longest retry backoff (1 day).
	MaxRetryMs = 24 * 3600 * 1000
	// MaxText is the longest free text (a prompt, a message, a summary, a
	// description), in bytes.
	MaxText = 64 << 10
)

// occurrence is the one time a one-shot fires (0 for the other kinds):
// the time its run records name, retries included.
func occurrence(s *abi.Schedule) int64 {
	switch s.Expression.Kind {
	case "at":
		return s.Expression.AtMs
	case "after":
		return addSat(s.CreatedAtMs, s.Expression.AfterMs)
	}
	return 0
}

// validateExpression checks an expression at now: its kind, its fields
// and their ranges (see HorizonMs).
func validateExpression(e *abi.Expression, now time.Time) error {
	nowMs := now.UnixMilli()
	switch e.Kind {
	case "at":
		if e.AtMs <= nowMs {
			return fmt.Errorf("at %s is in the past", time.UnixMilli(e.AtMs).UTC().Format(time.RFC3339))
		}
		if e.AtMs > addSat(nowMs, HorizonMs) {
			return fmt.Errorf("at %s is more than 100 years away", time.UnixMilli(e.AtMs).UTC().Format(time.RFC3339))
		}
	case "after":
		if e.AfterMs <= 0 || e.AfterMs > HorizonMs {
			return fmt.Errorf("afterMs must be positive and at most 100 years (%d ms)", int64(HorizonMs))
		}
	case "every":
		if e.EveryMs < MinEveryMs || e.EveryMs > HorizonMs {
			return fmt.Errorf("everyMs must be at least 1s (%d ms) and at most 100 years (%d ms)", MinEveryMs, int64(HorizonMs))
		}
		if e.AnchorMs != nil && (*e.AnchorMs < addSat(nowMs, -HorizonMs) || *e.AnchorMs > addSat(nowMs, HorizonMs)) {
			return fmt.Errorf("anchorMs must be within 100 years of now")
		}
	case "cron":
		// Through the cache: nextAfter parses it next.
		if _, err := parseCronCached(e.Expr, e.Timezone); err != nil {
			return err
		}
	default:
		return fmt.Errorf("expression kind %q: want at, after, every or cron", e.Kind)
	}
	return nil
}

// validateRetry checks a retry policy: 1 to MaxRetryAttempts attempts and
// a backoff of 0 < baseMs <= maxMs <= MaxRetryMs.
func validateRetry(r *abi.Retry) error {
	if r.MaxAttempts < 1 || r.MaxAttempts > MaxRetryAttempts || r.BaseMs < 1 || r.MaxMs < r.BaseMs || r.MaxMs > MaxRetryMs {
		return fmt.Errorf("retryPolicy needs 1 <= maxAttempts <= %d and 0 < baseMs <= maxMs <= %d (1 day)", MaxRetryAttempts, MaxRetryMs)
	}
	return nil
}

// backoff is the wait before retry attempt n (1: the first retry): baseMs
// doubled n-1 times, at most maxMs (and MaxRetryMs), without overflow.
func backoff(r *abi.Retry, n int) int64 {
	limit := min(max(r.MaxMs, 1), MaxRetryMs)
	b := max(r.BaseMs, 1)
	for i := 1; i < n && b < limit; i++ {
		b *= 2 // b < limit <= MaxRetryMs: no overflow
	}
	return min(b, limit)
}

// checkFreeText checks free text (a prompt, a message): the kernel's rule
// for names (kernel.CheckText: valid UTF-8, no control character) but
// with newline and tab allowed (a crontab renders them escaped) and at
// most MaxText bytes, so that it never forges a line or a terminal
// sequence where it is shown.
func checkFreeText(field, s string) error {
	// Newline and tab become spaces, byte for byte: lengths, offsets and
	// UTF-8 validity stay those of s.
	return textErr(kernel.CheckText(field, textBlanks.Replace(s), MaxText))
}

// textBlanks turns the control characters free text may hold into spaces.
var textBlanks = strings.NewReplacer("\n", " ", "\t", " ")

// checkWord checks a one-line field (a pid, a profile, a label, a
// conversation id) with the kernel's rule for names.
func checkWord(field, s string) error {
	return textErr(kernel.CheckText(field, s, kernel.MaxLabel))
}

// targetErr is err, a target's fault, as an error of schedule name: a
// 400, or the 501 it is (a seed's field not built yet).
func targetErr(name string, err error) error {
	if abi.KindOf(err) == abi.NotImplemented {
		return abi.E(abi.Path(name), err)
	}
	return abi.E(abi.Path(name), abi.Invalid, err)
}

// textErr is the cause of a kernel.CheckText error, for the caller to
// wrap with its own name and kind.
func textErr(err error) error {
	var ke *abi.Error
	if errors.As(err, &ke) && ke.Err != nil {
		return ke.Err
	}
	return err
}

// validateTarget checks a target's shape and text, and gives a
// process.spawn target its default profile (the run-as principal's
// permissions are checked when it runs, by the syscalls it makes, and
// whether its process can be reached, by sched.add and sched.update).
func validateTarget(t *abi.Target) error {
	switch t.Kind {
	case abi.TargetSpawn:
		if t.Profile == "" {
			t.Profile = "task"
		}
		if strings.TrimSpace(t.Prompt) == "" {
			return fmt.Errorf("process.spawn needs a prompt")
		}
		// The seed's fields of a spawn: proc.spawn's rules (a 501 for
		// what is not built yet, kept as such by targetErr).
		for _, err := range []error{t.Workspace.Check(), t.Assignment.Check(), abi.CheckSpawnMounts(t.Mounts)} {
			if err != nil {
				return err
			}
		}
	case abi.TargetEvent:
		if t.Pid == "" || strings.TrimSpace(t.Message) == "" {
			return fmt.Errorf("process.event needs a pid and a message")
		}
	case abi.TargetLifecycle:
		if t.Pid == "" {
			return fmt.Errorf("process.lifecycle needs a pid")
		}
		switch t.Action {
		case "compact", "reset", "checkpoint":
		default:
			return fmt.Errorf("lifecycle action %q: want compact, reset or checkpoint", t.Action)
		}
	case abi.TargetPackage:
		if t.PackageID == "" || t.Entrypoint == "" || t.Event == "" {
			return fmt.Errorf("package.event needs a packageId, an entrypoint and an event")
		}
		if len(t.Payload) > maxPayload || len(t.Payload) > 0 && !json.Valid(t.Payload) {
			return fmt.Errorf("package.event payload: JSON of at most %d bytes", maxPayload)
		}
	default:
		return fmt.Errorf("target kind %q: want process.spawn, process.event, process.lifecycle or package.event", t.Kind)
	}
	if t.Kind != abi.TargetPackage && (t.PackageID != "" || t.Entrypoint != "" || t.Event != "" || len(t.Payload) > 0) {
		return fmt.Errorf("packageId, entrypoint, event and payload are a package.event's")
	}
	if t.Kind != abi.TargetSpawn && (t.ParentPid != "" || t.Workspace != nil || t.Assignment != nil || len(t.Mounts) > 0) {
		return fmt.Errorf("parentPid, workspace, assignment and mounts are a process.spawn's")
	}
	for _, w := range []struct{ field, s string }{{"profile", t.Profile}, {"label", t.Label}, {"parentPid", t.ParentPid}, {"pid", t.Pid}, {"conversationId", t.ConversationID},
		{"packageId", t.PackageID}, {"entrypoint", t.Entrypoint}, {"event", t.Event}} {
		if err := checkWord(w.field, w.s); err != nil {
			return err
		}
	}
	sum, _ := t.Options["summary"].(string)
	for _, w := range []struct{ field, s string }{{"prompt", t.Prompt}, {"message", t.Message}, {"summary", sum}} {
		if err := checkFreeText(w.field, w.s); err != nil {
			return err
		}
	}
	return nil
}
