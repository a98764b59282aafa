package kernel

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"gsvfs.dev/gsvfs/abi"
)

// digestCases are the args types TestDigestArgsSame fills: every abi
// args type, and types that take each path of the plan.
func digestCases() []any {
	type inner struct {
		A string `json:"a"`
		N int    `json:"n,omitempty"`
	}
	type embedded struct{ inner }
	type edge struct {
		Pid      int               `json:"pid"`
		Conv     *string           `json:"conversation,omitempty"`
		Target   string            `json:"target"`
		Token    string            `json:"token"`
		Count    int64             `json:"count"`
		Secret   uint32            `json:"apiKey"`
		Flag     bool              `json:"flag,omitempty"`
		Ratio    float64           `json:"ratio"`
		Raw      json.RawMessage   `json:"raw,omitempty"`
		Value    json.RawMessage   `json:"value"`
		Bytes    []byte            `json:"blob"`
		List     []string          `json:"list"`
		Arr      [3]int            `json:"arr"`
		Map      map[string]any    `json:"map"`
		Inner    inner             `json:"inner"`
		PtrIn    *inner            `json:"ptr"`
		Any      any               `json:"any"`
		When     time.Time         `json:"when"`
		Env      map[string]string `json:"env"`
		Skip     string            `json:"-"`
		NoTag    string
		unexport string
	}
	return []any{
		abi.AuditQueryArgs{},
		abi.AuditVerifyArgs{},
		abi.AdapterInboundArgs{},
		abi.AdapterStateArgs{},
		abi.AdapterOutboxNextArgs{},
		abi.AdapterOutboxDoneArgs{},
		abi.AdapterStatusArgs{},
		abi.AdapterSendArgs{},
		abi.AdapterAccountArgs{},
		abi.LinkArgs{},
		abi.UnlinkArgs{},
		abi.LinkListArgs{},
		abi.LinkConsumeArgs{},
		abi.IpcEndedArgs{},
		abi.SignalForgetArgs{},
		abi.DeliverArgs{},
		abi.ConvStateArgs{},
		abi.RunStateArgs{},
		abi.NotificationFilesArgs{},
		abi.SetIdentityArgs{},
		abi.HistoryOpenArgs{},
		abi.CrontabCheckArgs{},
		abi.LastErrorArgs{},
		abi.ConnectArgs{},
		abi.RequestCancelArgs{},
		abi.CodeModeRunArgs{},
		abi.CodeModeExecArgs{},
		abi.ConvArgs{},
		abi.CompactArgs{},
		abi.HistoryArgs{},
		abi.PolicyArgs{},
		abi.ForkArgs{},
		abi.SegmentReadArgs{},
		abi.DeviceListArgs{},
		abi.DeviceGetArgs{},
		abi.DeviceRemoveArgs{},
		abi.DeviceUpdateArgs{},
		abi.DeviceGrantArgs{},
		abi.FSReadArgs{},
		abi.FSWriteArgs{},
		abi.FSEditArgs{},
		abi.FSDeleteArgs{},
		abi.FSSearchArgs{},
		abi.FileArgs{},
		abi.IpcSendArgs{},
		abi.IpcCallArgs{},
		abi.IpcDelegateArgs{},
		abi.IpcDeliverArgs{},
		abi.WatchArgs{},
		abi.UnwatchArgs{},
		abi.WatchListArgs{},
		abi.McpAddArgs{},
		abi.McpListArgs{},
		abi.McpServerArgs{},
		abi.McpCallArgs{},
		abi.McpToolsArgs{},
		abi.McpGetArgs{},
		abi.McpResultArgs{},
		abi.McpResourceReadArgs{},
		abi.McpPromptGetArgs{},
		abi.MediaFilesArgs{},
		abi.NotificationCreateArgs{},
		abi.NotificationListArgs{},
		abi.NotificationIDArgs{},
		abi.OAuthStartArgs{},
		abi.OAuthListArgs{},
		abi.OAuthForgetArgs{},
		abi.OAuthCallbackArgs{},
		abi.PidArgs{},
		abi.SpawnArgs{},
		abi.SendArgs{},
		abi.ListArgs{},
		abi.ProfileListArgs{},
		abi.HilArgs{},
		abi.KillArgs{},
		abi.CheckpointArgs{},
		abi.SessionOpenArgs{},
		abi.ExecArgs{},
		abi.SessionSignalArgs{},
		abi.SessionListArgs{},
		abi.SessionGetArgs{},
		abi.BlobReadArgs{},
		abi.RepoListArgs{},
		abi.RepoCreateArgs{},
		abi.RepoArgs{},
		abi.RepoReadArgs{},
		abi.RepoSearchArgs{},
		abi.RepoLogArgs{},
		abi.RepoDiffArgs{},
		abi.RepoCompareArgs{},
		abi.RepoApplyArgs{},
		abi.RepoImportArgs{},
		abi.RepoBlobArgs{},
		abi.RepoWireArgs{},
		abi.RunListArgs{},
		abi.DirectiveArgs{},
		abi.RunControlArgs{},
		abi.SchedListArgs{},
		abi.SchedAddArgs{},
		abi.SchedUpdateArgs{},
		abi.SchedIDArgs{},
		abi.SchedRunArgs{},
		abi.CrontabGetArgs{},
		abi.CrontabSetArgs{},
		abi.SchedLogArgs{},
		abi.ShellExecArgs{},
		abi.DaemonStatusArgs{},
		abi.WhoamiArgs{},
		abi.SyscallListArgs{},
		abi.SetupArgs{},
		abi.UserAddArgs{},
		abi.UserListArgs{},
		abi.GroupListArgs{},
		abi.TokenCreateArgs{},
		abi.TokenListArgs{},
		abi.TokenRevokeArgs{},
		abi.ConfigGetArgs{},
		abi.ConfigSetArgs{},
		abi.ConfigUnsetArgs{},
		abi.NoToolArgs{},
		abi.WorkspaceMakeArgs{},
		abi.WorkspaceOpenArgs{},
		abi.WorkspaceCheckpointArgs{},
		abi.WorkspaceMergeArgs{},
		abi.WorkspaceListArgs{},
		edge{}, embedded{}, inner{},
	}
}

// fill sets every settable field of v from r: strings of plain, special
// and multi-byte characters, some longer than a digest keeps; numbers;
// slices and maps of a few items; zero values too.
func fill(r *rand.Rand, v reflect.Value, depth int) {
	if r.IntN(5) == 0 {
		return // the zero value
	}
	switch v.Kind() {
	case reflect.String:
		parts := []string{"a", "pid-1", "<b>", "&", "\"q\"", "\\", "é", "\u2028", "\xff", "\n", strings.Repeat("x", 130), "/home/alice"}
		var b strings.Builder
		for i := r.IntN(4); i >= 0; i-- {
			b.WriteString(parts[r.IntN(len(parts))])
		}
		v.SetString(b.String())
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.IntN(2000) - 1000))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(r.IntN(200)))
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 0)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(r.Float64() * 1e6)
	case reflect.Pointer:
		if depth < 3 {
			p := reflect.New(v.Type().Elem())
			fill(r, p.Elem(), depth+1)
			v.Set(p)
		}
	case reflect.Slice:
		if v.Type() == reflect.TypeFor[json.RawMessage]() {
			raws := []string{`"sk-123"`, `12`, `{"a":1,"b":{"c":2}}`, `[1,2]`, `true`, `null`, ` "x" `}
			v.SetBytes([]byte(raws[r.IntN(len(raws))]))
			return
		}
		if depth < 3 {
			n := r.IntN(3)
			s := reflect.MakeSlice(v.Type(), n, n)
			for i := 0; i < n; i++ {
				fill(r, s.Index(i), depth+1)
			}
			v.Set(s)
		}
	case reflect.Array:
		for i := 0; i < v.Len(); i++ {
			fill(r, v.Index(i), depth+1)
		}
	case reflect.Map:
		if depth < 3 && v.Type().Key().Kind() == reflect.String {
			m := reflect.MakeMap(v.Type())
			for i := r.IntN(3); i > 0; i-- {
				e := reflect.New(v.Type().Elem()).Elem()
				fill(r, e, depth+1)
				if e.Kind() == reflect.Interface {
					e = reflect.ValueOf("v")
				}
				m.SetMapIndex(reflect.ValueOf([]string{"k", "password", "data", "pid"}[r.IntN(4)]), e)
			}
			v.Set(m)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Unix(int64(r.IntN(1e9)), 0).UTC()))
			return
		}
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).CanSet() {
				fill(r, v.Field(i), depth+1)
			}
		}
	}
}

// TestDigestArgsSame: the digest made without JSON is, for every args
// type and many values, the text of the digest of the args' JSON.
func TestDigestArgsSame(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range digestCases() {
		typ := reflect.TypeOf(c)
		for i := 0; i < 200; i++ {
			p := reflect.New(typ)
			fill(r, p.Elem(), 0)
			for _, args := range []any{p.Interface(), p.Elem().Interface()} {
				if got, want := digestArgs(args), digestJSON(args); got != want {
					j, _ := json.Marshal(args)
					t.Fatalf("%T %s:\ndigestArgs %+v\ndigestJSON %+v", args, j, got, want)
				}
			}
		}
	}
	if got := digestArgs(nil); got != (argDigest{}) {
		t.Errorf("nil args: %+v", got)
	}
	var nilp *abi.SendArgs
	if got, want := digestArgs(nilp), digestJSON(nilp); got != want {
		t.Errorf("nil pointer: %+v, want %+v", got, want)
	}
}

// FuzzDigestArgs: for any field values, the digest made without JSON is
// the digest of the args' JSON.
func FuzzDigestArgs(f *testing.F) {
	f.Add("p-1", "c-1", "hello", "sk", int64(3), true)
	f.Add("<&>", "\xff\xfe", strings.Repeat("é", 80), "", int64(-1), false)
	f.Fuzz(func(t *testing.T, pid, conv, msg, key string, n int64, b bool) {
		for _, args := range []any{
			&abi.SendArgs{Pid: pid, Message: msg},
			&abi.ConfigSetArgs{Key: key, Value: json.RawMessage(strconvQuote(msg))},
			&abi.FSWriteArgs{Path: pid, Content: msg},
			&abi.AuditQueryArgs{Pid: pid, Syscall: conv, After: n, Last: b},
		} {
			if got, want := digestArgs(args), digestJSON(args); got != want {
				t.Fatalf("%T: digestArgs %+v, digestJSON %+v", args, got, want)
			}
		}
	})
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
