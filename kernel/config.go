package kernel

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"gsvfs.dev/gsvfs/abi"
)

// defaultConfig is written on a fresh state.
var defaultConfig = map[string]string{
	"config/server/name":     "gsv",
	"config/system/timezone": "UTC",
	"config/ai/provider":     "offline",
	"config/ai/max_tokens":   "8192",
}

// secretWords are the words of a key name that make its value secret.
var secretWords = map[string]bool{
	"password": true, "passwd": true, "passphrase": true,
	"token": true, "secret": true, "secrets": true,
	"credential": true, "credentials": true, "apikey": true,
}

// keyQualifiers are the words that make a following "key" a secret one
// (api_key, apiKey, private-key, access.key).
var keyQualifiers = map[string]bool{"api": true, "private": true, "access": true, "secret": true}

// SensitiveKey reports whether a config key names a secret (a password,
// token, secret or API key): only root may see its value, and subsystems
// treat the value as a credential that follows its endpoint. It matches
// whole words of the key name, not substrings: a key's words are split at
// every character that is not a letter or digit and at camelCase humps,
// and compared without case. So config/ai/api_key, users/1000/ai/apiKey,
// config/bot/token and a/secret are sensitive; config/ai/max_tokens and
// config/ai/tokenizer are not.
func SensitiveKey(key string) bool {
	words := keyWords(key)
	for i, w := range words {
		if secretWords[w] || (w == "key" && i > 0 && keyQualifiers[words[i-1]]) {
			return true
		}
	}
	return false
}

// keyWords splits key into lower-case words: runs of letters and digits,
// cut again where a lower-case letter or digit meets an upper-case one
// ("apiKey": api, key) and before the last capital of a run of capitals
// followed by a lower-case letter ("APIKey": api, key).
func keyWords(key string) []string {
	var words []string
	rs := []rune(key)
	start := -1
	flush := func(end int) {
		if start >= 0 && end > start {
			words = append(words, strings.ToLower(string(rs[start:end])))
		}
		start = -1
	}
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			continue
		}
		if start < 0 {
			start = i
			continue
		}
		prev := rs[i-1]
		hump := unicode.IsUpper(r) && (unicode.IsLower(prev) || unicode.IsDigit(prev))
		acronymEnd := unicode.IsUpper(prev) && unicode.IsLower(r) && i-1 > start && unicode.IsUpper(rs[i-2])
		switch {
		case hump:
			flush(i)
			start = i
		case acronymEnd:
			flush(i - 1)
			start = i - 1
		}
	}
	flush(len(rs))
	return words
}

// configVisible says whether id may see key: root sees everything; others
// see their own users/<uid>/ keys and the non-sensitive config/ keys.
func configVisible(id *Identity, key string) bool {
	if id.IsRoot() {
		return true
	}
	if strings.HasPrefix(key, fmt.Sprintf("users/%d/", id.Uid)) {
		return true
	}
	return strings.HasPrefix(key, "config/") && !SensitiveKey(key)
}

// configWritable says whether id may set key: root anything, others only
// their own users/<uid>/ai/ keys.
func configWritable(id *Identity, key string) bool {
	return id.IsRoot() || strings.HasPrefix(key, fmt.Sprintf("users/%d/ai/", id.Uid))
}

// normalizeKey turns a dotted key ("ai.provider") into the stored key it
// means for id: a user's own override (users/<uid>/ai/provider) for the
// ai.* keys users may set, the system key (config/ai/provider) for root and
// for reads of everything else. Slash keys are returned unchanged.
func normalizeKey(id *Identity, key string, set bool) string {
	if strings.Contains(key, "/") || !strings.Contains(key, ".") {
		return key
	}
	path := strings.ReplaceAll(key, ".", "/")
	if !id.IsRoot() && strings.HasPrefix(path, "ai/") && set {
		return fmt.Sprintf("users/%d/%s", id.Uid, path)
	}
	return "config/" + path
}

// ConfigEntry is one config key and its value (abi.ConfigEntry).
type ConfigEntry = abi.ConfigEntry

// validKey: slash-separated segments of [A-Za-z0-9_.-].
var validKey = regexp.MustCompile(`^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$`)

// configSyscalls is the table of the configuration syscalls.
func (k *Kernel) configSyscalls() []Syscall {
	return []Syscall{
		Handle(abi.SysConfigGet, k.configGetCall),
		Handle(abi.SysConfigSet, k.configSet),
		Handle(abi.SysConfigUnset, k.configUnset),
	}
}

// A ConfigRule is the schema of the config keys whose stored name matches
// Pattern (path.Match: "*" is one segment, so users/*/process/cap is
// every user's): Check returns why a value is refused, or nil. A rule is
// checked at sys.config.set, before anything is stored, so that a value
// its reader cannot use (a process capability that does not parse, an
// unknown time zone) is a 400 naming the problem for whoever sets it,
// never a failure of every later reader.
type ConfigRule struct {
	Pattern string
	Check   func(value string) error
}

// ConfigRules registers rules for the values of config keys. The room
// that reads a key registers its rule when it is made, as it registers
// its syscalls; the kernel holds the rules of its own keys
// (config/system/timezone).
func (k *Kernel) ConfigRules(rules ...ConfigRule) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cfgRules = append(k.cfgRules, rules...)
}

// checkConfig checks val against the rules of key.
func (k *Kernel) checkConfig(key, val string) error {
	k.mu.RLock()
	rules := k.cfgRules
	k.mu.RUnlock()
	for _, r := range rules {
		if ok, _ := path.Match(r.Pattern, key); !ok {
			continue
		}
		if err := r.Check(val); err != nil {
			return abi.E(abi.Path(key), abi.Invalid, err.Error())
		}
	}
	return nil
}

// kernelConfigRules are the rules of the kernel's own config keys.
func kernelConfigRules() []ConfigRule {
	return []ConfigRule{{Pattern: "config/system/timezone", Check: checkTimezone},
		// The prices table is read by proc (its budgets and
		// /proc/<pid>/cost) and parsed by abi.
		{Pattern: "config/ai/prices", Check: func(v string) error { _, err := abi.ParsePrices(v); return err }},
		{Pattern: "config/audit/retention", Check: func(v string) error { _, err := ParseSince(v); return err }}}
}

// checkTimezone accepts an IANA time zone name ("UTC", "Europe/Amsterdam").
// "Local" (the daemon's host, which moves with it) and "" are refused.
func checkTimezone(tz string) error {
	if tz == "" || tz == "Local" {
		return fmt.Errorf("time zone %q: want an IANA time zone name such as UTC or Europe/Amsterdam", tz)
	}
	if _, err := time.LoadLocation(tz); err != nil {
		return fmt.Errorf("time zone %q: %v", tz, err)
	}
	return nil
}

// configGetCall serves sys.config.get: the entries the caller may see
// under a.Key. A user's dotted ai.* key reads their own override if they
// have one, else the system's key.
func (k *Kernel) configGetCall(ctx context.Context, c *Caller, a *abi.ConfigGetArgs) (*abi.ConfigGetResult, error) {
	if own := normalizeKey(c.Identity, a.Key, true); own != a.Key && own != normalizeKey(c.Identity, a.Key, false) {
		es, err := k.configGet(ctx, c.Identity, own)
		if err != nil {
			return nil, err
		}
		if len(es) > 0 {
			return &abi.ConfigGetResult{Entries: es}, nil
		}
	}
	es, err := k.configGet(ctx, c.Identity, normalizeKey(c.Identity, a.Key, false))
	if err != nil {
		return nil, err
	}
	return &abi.ConfigGetResult{Entries: es}, nil
}

// configSet serves sys.config.set: root sets any key, others only their
// own users/<uid>/ai/ keys. It signals sys.config.changed to those who
// may see the key.
func (k *Kernel) configSet(ctx context.Context, c *Caller, a *abi.ConfigSetArgs) (*abi.ConfigSetResult, error) {
	key := normalizeKey(c.Identity, a.Key, true)
	if !validKey.MatchString(key) {
		return nil, abi.E(abi.Path(key), abi.Invalid, "config keys are /-separated words of [A-Za-z0-9_.-]")
	}
	if !configWritable(c.Identity, key) {
		return nil, abi.E(abi.Path(key), abi.Permission, fmt.Sprintf("permission denied: you may set only users/%d/ai/...", c.Uid))
	}
	val := coerce(a.Value)
	if !utf8.ValidString(val) || strings.ContainsRune(val, 0) {
		return nil, abi.E(abi.Path(key), abi.Invalid, "value must be UTF-8 text without NUL")
	}
	if err := k.checkConfig(key, val); err != nil {
		return nil, err
	}
	if _, err := k.Store.Exec(ctx, `INSERT INTO config(key,value) VALUES(?,?)
		ON CONFLICT(key) DO UPDATE SET value=excluded.value`, key, val); err != nil {
		return nil, abi.E(abi.Path(key), err)
	}
	aud := audience{all: strings.HasPrefix(key, "config/") && !SensitiveKey(key)}
	if !aud.all {
		aud.uids = ownerOfConfigKey(key)
	}
	publish(k, abi.SigConfigChange, abi.ConfigChanged{Key: key}, aud)
	return &abi.ConfigSetResult{OK: true}, nil
}

// configUnset serves sys.config.unset: it removes a key, under the rule of
// sys.config.set (root any key, others their own users/<uid>/ai/ keys;
// a dotted key names the same key a set would), so that a reader falls
// back to the key's default (a user's ai.* key to the system's). A key
// that is not set is a 404, as rm of a missing file; the kernel's own
// record (sys/...) is not removed (400). It signals sys.config.changed
// with unset:true to those who may see the key.
func (k *Kernel) configUnset(ctx context.Context, c *Caller, a *abi.ConfigUnsetArgs) (*abi.ConfigSetResult, error) {
	key := normalizeKey(c.Identity, a.Key, true)
	if !validKey.MatchString(key) {
		return nil, abi.E(abi.Path(key), abi.Invalid, "config keys are /-separated words of [A-Za-z0-9_.-]")
	}
	if !configWritable(c.Identity, key) {
		return nil, abi.E(abi.Path(key), abi.Permission, fmt.Sprintf("permission denied: you may unset only users/%d/ai/...", c.Uid))
	}
	if strings.HasPrefix(key, "sys/") {
		return nil, abi.E(abi.Path(key), abi.Invalid, "sys/ keys are the kernel's own record")
	}
	res, err := k.Store.Exec(ctx, `DELETE FROM config WHERE key=?`, key)
	if err != nil {
		return nil, abi.E(abi.Path(key), err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, abi.E(abi.Path(key), err)
	} else if n == 0 {
		return nil, abi.E(abi.Path(key), abi.NotExist, "no such config key")
	}
	aud := audience{all: strings.HasPrefix(key, "config/") && !SensitiveKey(key)}
	if !aud.all {
		aud.uids = ownerOfConfigKey(key)
	}
	publish(k, abi.SigConfigChange, abi.ConfigChanged{Key: key, Unset: true}, aud)
	return &abi.ConfigSetResult{OK: true}, nil
}

// ownerOfConfigKey returns the uid of a users/<uid>/ key.
func ownerOfConfigKey(key string) []uint32 {
	var uid uint32
	if _, err := fmt.Sscanf(key, "users/%d/", &uid); err == nil {
		return []uint32{uid}
	}
	return nil
}

// coerce turns a JSON value into config text, as String(value) would: a
// JSON string is its text; any other value (a number, an object, or text
// that is not a JSON string) is its JSON text, trimmed.
func coerce(raw json.RawMessage) string {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s
	}
	t := strings.TrimSpace(string(raw))
	if t == "" {
		return ""
	}
	return t
}

// configGet returns the visible entries: key exactly, or everything under
// the prefix key, or everything for "".
func (k *Kernel) configGet(ctx context.Context, id *Identity, key string) ([]ConfigEntry, error) {
	out := []ConfigEntry{}
	err := k.Store.eachRow(ctx, func(rows *sql.Rows) error {
		var e ConfigEntry
		if err := rows.Scan(&e.Key, &e.Value); err != nil {
			return err
		}
		if e.Key == "sys/setup" && !id.IsRoot() {
			return nil
		}
		if configVisible(id, e.Key) {
			out = append(out, e)
		}
		return nil
	}, `SELECT key,value FROM config WHERE key=? OR ?='' OR substr(key,1,length(?)+1)=?||'/' OR (substr(?,length(?),1)='/' AND substr(key,1,length(?))=?) ORDER BY key`,
		key, key, key, key, key, key, key, key)
	if err != nil {
		return nil, abi.E(abi.Path(key), err)
	}
	return out, nil
}
