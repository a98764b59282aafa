package bridge

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// The webhook kind: any system that speaks HTTP. Messages come in as
// POSTs to the bridge's own listener, signed with HMAC-SHA256 of the body
// under the shared secret (--bot-token-file) in the SignatureHeader, as
// "sha256=<hex>"; replies go out as POSTs to --base-url, signed the same
// way. Options: listen (host:port of the listener, default
// 127.0.0.1:0: a free port, shown in the account's status as extra
// "listen"), path (default /inbound).

// SignatureHeader carries a webhook body's signature, both ways.
const SignatureHeader = "X-GSV-Signature"

// maxWebhookBody is the largest body the listener reads.
const maxWebhookBody = 1 << 20

func init() {
	Register("webhook", func(cfg Config) (Adapter, error) {
		if cfg.Secret == "" {
			return nil, errors.New("webhook: a shared secret is needed (--bot-token-file)")
		}
		w := &webhook{cfg: cfg, listen: "127.0.0.1:0", path: "/inbound",
			client: &http.Client{Timeout: 30 * time.Second}}
		for k, v := range cfg.Options {
			switch k {
			case "listen":
				w.listen = v
			case "path":
				if !strings.HasPrefix(v, "/") {
					return nil, fmt.Errorf("webhook: path %q: want one starting with /", v)
				}
				w.path = v
			default:
				return nil, fmt.Errorf("webhook: unknown option %q (listen, path)", k)
			}
		}
		return w, nil
	})
}

// webhook is the webhook kind's Adapter.
type webhook struct {
	cfg    Config
	listen string
	path   string
	client *http.Client
}

// Kind implements Adapter.
func (*webhook) Kind() string { return "webhook" }

// Limits implements Adapter: long texts, no edits, no media.
func (*webhook) Limits() Limits { return Limits{MaxText: 64 << 10} }

// Sign is the signature header's value of body under secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// verify reports whether sig is body's signature under secret.
func verify(secret, body []byte, sig string) bool {
	return hmac.Equal([]byte(sig), []byte(Sign(secret, body)))
}

// WebhookMessage is the body of an inbound webhook POST.
type WebhookMessage struct {
	MessageID    string             `json:"messageId"`
	Surface      abi.AdapterSurface `json:"surface"`
	Actor        *abi.AdapterActor  `json:"actor,omitempty"`
	Text         string             `json:"text"`
	Media        []abi.MediaInput   `json:"media,omitempty"`
	ReplyToID    string             `json:"replyToId,omitempty"`
	WasMentioned bool               `json:"wasMentioned,omitempty"`
	Timestamp    int64              `json:"timestamp,omitempty"`
}

// parseWebhook reads an inbound body: a JSON object with no field
// WebhookMessage lacks, naming a message id, a surface and an actor.
func parseWebhook(body []byte) (abi.AdapterMessage, error) {
	var m WebhookMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return abi.AdapterMessage{}, fmt.Errorf("the body: %v", err)
	}
	if dec.More() {
		return abi.AdapterMessage{}, errors.New("the body: more than one JSON value")
	}
	switch {
	case m.MessageID == "":
		return abi.AdapterMessage{}, errors.New("the body: no messageId")
	case m.Surface.Kind == "" || m.Surface.ID == "":
		return abi.AdapterMessage{}, errors.New("the body: no surface kind and id")
	case m.Actor == nil || m.Actor.ID == "":
		return abi.AdapterMessage{}, errors.New("the body: no actor id")
	}
	if m.Timestamp == 0 {
		m.Timestamp = time.Now().UnixMilli()
	}
	return abi.AdapterMessage{MessageID: m.MessageID, Surface: m.Surface, Actor: m.Actor, Text: m.Text, Media: m.Media,
		ReplyToID: m.ReplyToID, WasMentioned: m.WasMentioned, Timestamp: m.Timestamp}, nil
}

// Run implements Adapter: it serves the listener until ctx ends.
func (w *webhook) Run(ctx context.Context, sink Sink) error {
	l, err := net.Listen("tcp", w.listen)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(w.path, func(rw http.ResponseWriter, req *http.Request) { w.serve(rw, req, sink) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	sink.State(abi.AdapterAccountStatus{Connected: true, Authenticated: true, Mode: "webhook",
		LastActivity: time.Now().UnixMilli(), Extra: map[string]string{"listen": l.Addr().String(), "path": w.path}})
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
		return nil
	case err := <-errc:
		return err
	}
}

// serve answers one inbound POST: 401 for a bad signature (nothing is
// done), 400 for a body that does not parse, else the kernel's answer.
func (w *webhook) serve(rw http.ResponseWriter, req *http.Request, sink Sink) {
	if req.Method != http.MethodPost {
		http.Error(rw, "POST only", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, req.Body, maxWebhookBody))
	if err != nil {
		http.Error(rw, fmt.Sprintf("the body: at most %d bytes", maxWebhookBody), http.StatusRequestEntityTooLarge)
		return
	}
	if !verify([]byte(w.cfg.Secret), body, req.Header.Get(SignatureHeader)) {
		http.Error(rw, "bad signature", http.StatusUnauthorized)
		return
	}
	m, err := parseWebhook(body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	if err := sink.Deliver(req.Context(), m); err != nil {
		code := http.StatusServiceUnavailable
		var ke *KernelError
		if errors.As(err, &ke) && ke.Code >= 400 && ke.Code < 600 {
			code = ke.Code
		}
		http.Error(rw, err.Error(), code)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	io.WriteString(rw, `{"ok":true}`+"\n")
}

// webhookOut is the body of an outbound POST.
type webhookOut struct {
	Surface   abi.AdapterSurface `json:"surface"`
	Text      string             `json:"text"`
	Media     []abi.MediaInput   `json:"media,omitempty"`
	ReplyToID string             `json:"replyToId,omitempty"`
}

// Send implements Adapter: a signed POST to the base URL. A 2xx answer
// may name the message ({"messageId": ...}); a timeout, a 408 or a 5xx,
// or a connection lost once the request went, is ambiguous.
func (w *webhook) Send(ctx context.Context, out Outbound) (Sent, error) {
	if w.cfg.BaseURL == "" {
		return Sent{}, errors.New("webhook: no --base-url to send to")
	}
	body, err := json.Marshal(webhookOut{Surface: out.Surface, Text: out.Text, Media: out.Media, ReplyToID: out.ReplyToID})
	if err != nil {
		return Sent{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.cfg.BaseURL, bytes.NewReader(body))
	if err != nil {
		return Sent{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(SignatureHeader, Sign([]byte(w.cfg.Secret), body))
	resp, err := w.client.Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return Sent{}, err // never reached the platform
		}
		return Sent{}, Ambiguous(err)
	}
	defer resp.Body.Close()
	rb, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusRequestTimeout || resp.StatusCode >= 500:
		return Sent{}, Ambiguous(fmt.Errorf("webhook: %s", resp.Status))
	case resp.StatusCode >= 300:
		return Sent{}, fmt.Errorf("webhook: %s: %s", resp.Status, strings.TrimSpace(string(rb)))
	}
	var ans struct {
		MessageID string `json:"messageId"`
	}
	json.Unmarshal(rb, &ans)
	return Sent{MessageID: ans.MessageID}, nil
}
