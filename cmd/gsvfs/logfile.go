package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"gsvfs.dev/gsvfs/kernel"
)

// newFileLogger is the daemon's logger: at level, as text or JSON, to
// file (appended, 0600) or stderr. Each record of a request carries its
// trace id (traceHandler). closeLog closes the file.
func newFileLogger(level, file, format string) (log *slog.Logger, closeLog func(), err error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	var w io.Writer = os.Stderr
	closeLog = func() {}
	if file != "" {
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		w, closeLog = f, func() { f.Close() }
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "", "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		closeLog()
		return nil, nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return slog.New(kernel.TraceHandler(h)), closeLog, nil
}
