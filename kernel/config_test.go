package kernel

import "testing"

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
