package mcp

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// The limits of a call.
const (
	defaultCallTimeout = 60 * time.Second
	maxCallTimeout     = 10 * time.Minute
	// maxInline is the largest result a call returns whole; a larger
	// one is kept as a file and returned as a preview and its path.
	maxInline = 1 << 20
	// previewBytes is the most of a kept result's text its preview has.
	previewBytes = 4 << 10
	// keptResults is how many large results are kept per server: the
	// oldest goes when another comes.
	keptResults = 8
)

// call is sys.mcp.call: the tool a.Name of one of the caller's servers
// (root: uid's), connecting the server if it is not, within the call's
// timeout, after which the call is cancelled on the server (the SDK
// sends notifications/cancelled) and fails with 504. The caller going
// away cancels it the same way. A server that goes away during the call
// fails it at once (503, with how its command ended). Every error names
// the server.
func (m *Room) call(ctx context.Context, c *kernel.Caller, a *abi.McpCallArgs) (*abi.McpCallResult, error) {
	uid, ok := scope(c, a.Uid)
	rec, err := m.findForCall(ctx, uid, a.ServerID)
	if !ok || errors.Is(err, errNoServer) {
		return nil, abi.E(abi.Path(a.ServerID), abi.NotExist, "no such MCP server")
	}
	if err != nil {
		return nil, err
	}
	if err := m.seen(ctx, c, rec.name); err != nil {
		return nil, err
	}
	fail := func(kind abi.Kind, msg string) error {
		return abi.E(abi.Path(rec.name), kind, fmt.Sprintf("MCP server %s: %s", rec.name, msg))
	}
	if err := checkName("tool", a.Name); err != nil {
		return nil, abi.E(abi.Path(rec.name), err)
	}
	args := a.Arguments
	if len(bytes.TrimSpace(args)) == 0 || string(bytes.TrimSpace(args)) == "null" {
		args = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return nil, fail(abi.Invalid, "arguments: want a JSON object")
	}
	timeout := defaultCallTimeout
	if a.TimeoutMs != nil {
		if *a.TimeoutMs <= 0 {
			return nil, fail(abi.Invalid, "timeoutMs must be positive")
		}
		timeout = min(maxCallTimeout, time.Duration(*a.TimeoutMs)*time.Millisecond)
	}
	if err := m.allowed(ctx, rec, c); err != nil {
		return nil, err
	}
	var byBudget bool
	if timeout, byBudget, err = m.budgeted(ctx, c, rec.name, timeout); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cn, err := m.link(rec).get(cctx)
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case cctx.Err() != nil:
			return nil, fail(abi.Timeout, fmt.Sprintf("it did not come up within the call's %s", timeout))
		}
		return nil, fail(abi.KindOf(err), err.Error())
	}
	res, err := cn.cs.CallTool(cctx, &sdk.CallToolParams{Name: a.Name, Arguments: args})
	if err != nil {
		var werr *jsonrpc.Error
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case cctx.Err() != nil:
			within := timeout.Round(time.Millisecond).String()
			if byBudget {
				within = "the " + within + " its process's budget had left"
			}
			return nil, fail(abi.Timeout, fmt.Sprintf("tool %s: no answer within %s (the call was cancelled on the server)", a.Name, within))
		case errors.As(err, &werr):
			return nil, fail(abi.Invalid, fmt.Sprintf("tool %s: %s", a.Name, werr.Message))
		case cn.wentAway(err):
			msg := "it went away during the call"
			if why := cn.why(); why != "" {
				msg += ": " + why
			}
			return nil, fail(abi.Offline, msg)
		}
		return nil, fail(abi.Offline, fmt.Sprintf("tool %s: %v", a.Name, err))
	}
	return m.result(rec, res)
}

// result is the call result of res: whole, or, over maxInline, kept as
// a file of server rec's and returned as its path and a preview.
func (m *Room) result(rec *record, res *sdk.CallToolResult) (*abi.McpCallResult, error) {
	out := &abi.McpCallResult{IsError: res.IsError}
	var err error
	if out.Content, err = json.Marshal(orEmpty(res.Content)); err != nil {
		return nil, abi.E(abi.Path(rec.name), fmt.Sprintf("MCP server %s: its result: %v", rec.name, err))
	}
	if res.StructuredContent != nil {
		if out.StructuredContent, err = json.Marshal(res.StructuredContent); err != nil {
			return nil, abi.E(abi.Path(rec.name), fmt.Sprintf("MCP server %s: its structured result: %v", rec.name, err))
		}
	}
	if len(out.Content)+len(out.StructuredContent) <= maxInline {
		return out, nil
	}
	whole, err := json.Marshal(out)
	if err != nil {
		return nil, abi.E(err)
	}
	digest, err := m.keep(rec.id, whole)
	if err != nil {
		return nil, abi.E(abi.Path(rec.name), fmt.Sprintf("MCP server %s: keeping its large result: %v", rec.name, err))
	}
	user := fmt.Sprint(rec.uid)
	if u, err := m.k.UserOf(context.Background(), rec.uid); err == nil {
		user = u.Username
	}
	return &abi.McpCallResult{IsError: res.IsError, Blob: &abi.McpResultBlob{
		Path:      fmt.Sprintf("%s/%s/%s/results/%s", dirPath, user, rec.name, digest),
		SizeBytes: int64(len(whole)),
		Preview:   preview(res, whole),
	}}, nil
}

// preview is the start of a result's text content (its JSON if it has
// none), at most previewBytes, cut at a rune boundary.
func preview(res *sdk.CallToolResult, whole []byte) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*sdk.TextContent); ok {
			b.WriteString(t.Text)
			if b.Len() >= previewBytes {
				break
			}
		}
	}
	s := b.String()
	if s == "" {
		s = string(whole)
	}
	return cut(s, previewBytes)
}

// keep writes a large result of server id as a file named by its
// digest, and drops the oldest past keptResults.
func (m *Room) keep(id string, b []byte) (string, error) {
	sum := sha256.Sum256(b)
	digest := hex.EncodeToString(sum[:])
	dir := filepath.Join(m.results, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, digest)); err != nil {
		os.Remove(tmp.Name())
		return "", err
	}
	names := m.keptNames(id)
	if len(names) > keptResults {
		for _, n := range names[:len(names)-keptResults] {
			os.Remove(filepath.Join(dir, n))
		}
	}
	return digest, nil
}

// keptNames are the digests of server id's kept results, oldest first.
func (m *Room) keptNames(id string) []string {
	ents, err := os.ReadDir(filepath.Join(m.results, id))
	if err != nil {
		return nil
	}
	type kept struct {
		name string
		at   time.Time
	}
	var ks []kept
	for _, e := range ents {
		if !validDigest(e.Name()) {
			continue
		}
		if fi, err := e.Info(); err == nil {
			ks = append(ks, kept{e.Name(), fi.ModTime()})
		}
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i].at.Before(ks[j].at) })
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.name
	}
	return out
}

// validDigest reports whether s is a sha256 digest in lower-case hex.
func validDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, r := range s {
		if !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') {
			return false
		}
	}
	return true
}

// dropResults removes server id's kept results.
func (m *Room) dropResults(id string) { os.RemoveAll(filepath.Join(m.results, id)) }

// resultServer finds the server of an Internal result call: a.Uid's, for
// that user or root.
func (m *Room) resultServer(ctx context.Context, c *kernel.Caller, a *abi.McpResultArgs) (*record, error) {
	if c.Uid != a.Uid && !c.IsRoot() {
		return nil, abi.E(abi.Path(a.ServerID), abi.NotExist, "no such MCP server")
	}
	rec, err := m.find(ctx, a.Uid, a.ServerID)
	if errors.Is(err, errNoServer) {
		return nil, abi.E(abi.Path(a.ServerID), abi.NotExist, "no such MCP server")
	}
	return rec, err
}

// resultList is the Internal sys.mcp.result.list: the digests of a
// server's kept results, oldest first.
func (m *Room) resultList(ctx context.Context, c *kernel.Caller, a *abi.McpResultArgs) ([]string, error) {
	rec, err := m.resultServer(ctx, c, a)
	if err != nil {
		return nil, err
	}
	return m.keptNames(rec.id), nil
}

// resultOpen is the Internal sys.mcp.result.open: a kept result, open
// for reading.
func (m *Room) resultOpen(ctx context.Context, c *kernel.Caller, a *abi.McpResultArgs) (*os.File, error) {
	rec, err := m.resultServer(ctx, c, a)
	if err != nil {
		return nil, err
	}
	if !validDigest(a.Digest) {
		return nil, abi.E(abi.Path(a.Digest), abi.NotExist, "no such result")
	}
	f, err := os.Open(filepath.Join(m.results, rec.id, a.Digest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, abi.E(abi.Path(a.Digest), abi.NotExist, "no such result (only the last few are kept)")
	}
	if err != nil {
		return nil, abi.E(err)
	}
	return f, nil
}

// budgeted bounds a call of an agent process's (c.Identity.Pid) by its
// run's budget (docs/runs.md): a call made when a limit of the budget is
// spent is refused (403, naming the limit: extend the budget to go on),
// and its timeout is at most the time the budget has left (then it
// reports true). A caller that
// is no process, or whose run cannot be read, is bound by nothing more.
func (m *Room) budgeted(ctx context.Context, c *kernel.Caller, server string, timeout time.Duration) (time.Duration, bool, error) {
	if c.Identity == nil || c.Identity.Pid == "" {
		return timeout, false, nil
	}
	info, err := kernel.Do(ctx, m.k, c, abi.ProcRunGet, &abi.PidArgs{Pid: c.Identity.Pid})
	if err != nil || info == nil {
		return timeout, false, nil
	}
	b, u := info.Budget, info.Used
	spent := ""
	switch {
	case b.USD > 0 && u.USD >= b.USD:
		spent = "usd"
	case b.Tokens > 0 && u.TokensIn+u.TokensOut >= b.Tokens:
		spent = "tokens"
	case b.Turns > 0 && u.Turns >= b.Turns:
		spent = "turns"
	case b.TimeMs > 0 && u.TimeMs >= b.TimeMs:
		spent = "time"
	}
	if spent != "" {
		return 0, false, abi.E(abi.Path(server), abi.Permission, fmt.Sprintf("MCP server %s: process %s's budget is spent (%s): extend it to continue", server, c.Identity.Pid, spent))
	}
	if left := time.Duration(b.TimeMs-u.TimeMs) * time.Millisecond; b.TimeMs > 0 && left < timeout {
		return left, true, nil
	}
	return timeout, false, nil
}
