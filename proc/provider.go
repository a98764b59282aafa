package proc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
	"gsvfs.dev/gsvfs/proc/model"
)

// The model provider of a process's owner, from the AI configuration.

// aiEndpointKeys name where the model is: a secret of one config level
// goes only to an endpoint of that level.
var aiEndpointKeys = []string{"provider", "base_url"}

// MaxScript is the largest script (config/ai/script) the scripted
// provider reads.
const MaxScript = 1 << 20

// aiConfig returns the owner's AI configuration, resolved level by level
// (resolveAI): config/ai/* and users/<uid>/ai/*. systemEndpoint says that
// the endpoint is the system's.
func (m *engine) aiConfig(ctx context.Context, uid uint32) (cfg map[string]string, systemEndpoint bool) {
	level := func(prefix string) map[string]string {
		out := map[string]string{}
		r, err := kernel.Do(ctx, m.k, m.k.KernelCaller(), abi.SysConfigGet, &abi.ConfigGetArgs{Key: prefix})
		if err != nil {
			return out
		}
		for _, e := range r.Entries {
			out[strings.TrimPrefix(e.Key, prefix+"/")] = e.Value
		}
		return out
	}
	return resolveAI(level("config/ai"), level(fmt.Sprintf("users/%d/ai", uid)))
}

// resolveAI merges the system level sys and a user's level user of the ai
// configuration: the user's keys override the system's, except that
// credentials follow their endpoint. When the user sets any endpoint key
// (provider, base_url), the endpoint is the user's and no secret of the
// system level (kernel.SensitiveKey: api_key and any other) is kept: the
// user's endpoint gets only the user's own secrets. The user's own
// secrets are theirs to send anywhere, the system's endpoint included.
func resolveAI(sys, user map[string]string) (cfg map[string]string, systemEndpoint bool) {
	systemEndpoint = true
	for _, k := range aiEndpointKeys {
		if _, ok := user[k]; ok {
			systemEndpoint = false
		}
	}
	cfg = map[string]string{}
	for k, v := range sys {
		if !systemEndpoint && kernel.SensitiveKey(k) {
			continue
		}
		cfg[k] = v
	}
	for k, v := range user {
		cfg[k] = v
	}
	return cfg, systemEndpoint
}

// provider returns the model provider and model name for uid. A scripted
// provider's script (config/ai/script) is a file of the namespace, read
// as uid through the dispatcher (fs.readraw: a regular file the user may
// read, MaxScript bytes at most) at each call: a changed script starts a
// new replay. No lock is held across the read or the model's making.
func (m *engine) provider(ctx context.Context, uid uint32) (model.Provider, string, error) {
	if m.opts.Provider != nil {
		return m.opts.Provider(ctx, uid)
	}
	cfg, systemEndpoint := m.aiConfig(ctx, uid)
	timeout := 120 * time.Second
	if s, err := strconv.Atoi(cfg["timeout_ms"]); err == nil && s > 0 {
		timeout = time.Duration(s) * time.Millisecond
	}
	mc := model.Config{Provider: cfg["provider"], Model: cfg["model"], BaseURL: cfg["base_url"],
		APIKey: cfg["api_key"], Script: cfg["script"], Timeout: timeout, UseEnvironment: systemEndpoint}
	var scriptSum string
	if strings.EqualFold(strings.TrimSpace(mc.Provider), "scripted") && mc.Script != "" {
		data, err := m.readScript(ctx, uid, mc.Script)
		if err != nil {
			return nil, mc.Model, err
		}
		mc.ScriptData = data
		sum := sha256.Sum256(data)
		scriptSum = hex.EncodeToString(sum[:])
	}
	// Providers are kept per user and configuration: a scripted provider
	// is stateful (it replays its script turn by turn and numbers its
	// tool calls), and the others keep their HTTP connections.
	key := strings.Join([]string{strconv.FormatUint(uint64(uid), 10), mc.Provider, mc.Model, mc.BaseURL, mc.APIKey,
		mc.Script, scriptSum, timeout.String(), strconv.FormatBool(systemEndpoint)}, "\x00")
	m.provMu.Lock()
	p, ok := m.provCache[key]
	m.provMu.Unlock()
	if ok {
		return p, mc.Model, nil
	}
	p, err := model.New(mc)
	if err != nil {
		return nil, mc.Model, err
	}
	m.provMu.Lock()
	defer m.provMu.Unlock()
	if q, ok := m.provCache[key]; ok {
		return q, mc.Model, nil // another call made it meanwhile
	}
	if m.provCache == nil || len(m.provCache) >= 256 {
		m.provCache = map[string]model.Provider{} // bounded: configurations change rarely
	}
	m.provCache[key] = p
	return p, mc.Model, nil
}

// readScript reads the scripted provider's script at path (a namespace
// path; ~ is uid's home) as uid.
func (m *engine) readScript(ctx context.Context, uid uint32, path string) ([]byte, error) {
	id, err := m.k.IdentityOf(ctx, uid)
	if err != nil {
		return nil, err
	}
	data, err := kernel.Do(ctx, m.k, &kernel.Caller{Identity: id}, abi.FsReadraw, &abi.FileArgs{Path: path, Max: MaxScript})
	if err != nil {
		return nil, fmt.Errorf("config ai/script %s: %w", path, err)
	}
	return data, nil
}
