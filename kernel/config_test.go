package kernel

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"gsvfs.dev/gsvfs/abi"
)

func TestSensitiveKey(t *testing.T) {
	for _, tc := range []struct {
		key  string
		want bool
	}{
		{"config/ai/api_key", true},
		{"config/ai/apiKey", true},
		{"config/ai/APIKey", true},
		{"config/ai/apikey", true},
		{"config/ai/api-key", true},
		{"users/1000/ai/api_key", true},
		{"config/bot/token", true},
		{"config/discord/bot_token", true},
		{"config/oauth/accessToken", true},
		{"config/secret", true},
		{"config/db/password", true},
		{"config/db/Password", true},
		{"config/ssh/private_key", true},
		{"config/ai/max_tokens", false},
		{"config/ai/maxTokens", false},
		{"config/ai/tokenizer", false},
		{"config/ai/provider", false},
		{"config/server/name", false},
		{"config/ui/keyboard", false},
		{"config/ui/hotkey", false},
		{"config/cache/key", false},
		{"config/secretary/name", false},
		{"config/passwords_policy", false},
		{"", false},
	} {
		if got := SensitiveKey(tc.key); got != tc.want {
			t.Errorf("SensitiveKey(%q) = %v, want %v (words %q)", tc.key, got, tc.want, keyWords(tc.key))
		}
	}
}

// A config key with a rule (ConfigRules) takes only values its rule
// accepts: a refused set is a 400 naming the problem and stores nothing.
// sys.config.unset removes a key under the rule of set (issue 20, item
// 18).
func TestConfigRulesAndUnset(t *testing.T) {
	k, root, alice, _ := newKernel(t)
	ctx := context.Background()
	call := func(id *Identity, name string, args any) error {
		_, err := k.Call(ctx, &Caller{Identity: id}, name, args)
		return err
	}
	set := func(id *Identity, key, val string) error {
		v, _ := json.Marshal(val)
		return call(id, "sys.config.set", &abi.ConfigSetArgs{Key: key, Value: v})
	}
	unset := func(id *Identity, key string) error {
		return call(id, "sys.config.unset", &abi.ConfigUnsetArgs{Key: key})
	}
	value := func(id *Identity, key string) string {
		es, err := k.configGet(ctx, id, key)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Key == key {
				return e.Value
			}
		}
		return "<unset>"
	}
	k.ConfigRules(ConfigRule{Pattern: "users/*/box/size", Check: func(v string) error {
		if v != "small" && v != "large" {
			return fmt.Errorf("size %q: want small or large", v)
		}
		return nil
	}})
	for _, c := range []struct {
		key, val, err string
	}{
		{"users/1000/box/size", "huge", `sys.config.set: users/1000/box/size: size "huge": want small or large`},
		{"config/system/timezone", "Mars/Olympus", `sys.config.set: config/system/timezone: time zone "Mars/Olympus": unknown time zone Mars/Olympus`},
		{"config/system/timezone", "Local", `sys.config.set: config/system/timezone: time zone "Local": want an IANA time zone name such as UTC or Europe/Amsterdam`},
	} {
		before := value(root, c.key)
		if err := set(root, c.key, c.val); abi.Code(err) != 400 || err.Error() != c.err {
			t.Errorf("set %s %q: %v, want 400 %q", c.key, c.val, err, c.err)
		}
		if got := value(root, c.key); got != before {
			t.Errorf("a refused %s is stored: %q", c.key, got)
		}
	}
	if err := set(root, "users/1000/box/size", "large"); err != nil {
		t.Errorf("a value the rule takes: %v", err)
	}
	if err := set(root, "users/1000/box/other", "huge"); err != nil {
		t.Errorf("a key no rule names: %v", err)
	}

	// unset: a user's own ai keys (dotted too), root's any key but sys/.
	if err := set(root, "ai.model", "big"); err != nil {
		t.Fatal(err)
	}
	if err := set(alice, "ai.model", "small"); err != nil {
		t.Fatal(err)
	}
	if err := unset(alice, "ai.model"); err != nil {
		t.Fatalf("alice unsets her ai.model: %v", err)
	}
	res, err := k.Call(ctx, &Caller{Identity: alice}, "sys.config.get", &abi.ConfigGetArgs{Key: "ai.model"})
	if es := res.(*abi.ConfigGetResult).Entries; err != nil || len(es) != 1 || es[0].Value != "big" {
		t.Fatalf("after her unset alice reads ai.model %+v, %v; want the system's", res, err)
	}
	for _, c := range []struct {
		id   *Identity
		key  string
		code int
	}{
		{alice, "ai.model", 404},
		{alice, "users/1000/ai/nothing", 404},
		{alice, "config/ai/model", 403},
		{alice, "users/1001/ai/model", 403},
		{alice, "users/1000/box/size", 403},
		{root, "sys/setup", 400},
		{root, "bad key", 400},
	} {
		if err := unset(c.id, c.key); abi.Code(err) != c.code {
			t.Errorf("unset %s as %s: %v, want %d", c.key, c.id.Username, err, c.code)
		}
	}
	if value(root, "sys/setup") == "<unset>" || value(root, "config/ai/model") != "big" {
		t.Errorf("refused unsets removed keys")
	}
	if err := unset(root, "users/1000/box/size"); err != nil || value(root, "users/1000/box/size") != "<unset>" {
		t.Errorf("root unsets a user's key: %v", err)
	}
}
