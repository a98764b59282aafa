package abi

import (
	"encoding/json"
	"testing"
)

// TestProcSignalPayloadsJSON checks that each proc signal's payload
// marshals byte for byte as the map[string]any it replaced did (sorted
// keys, the same keys present, absent or null), in every shape proc
// publishes it: clients and watches read these frames.
func TestProcSignalPayloadsJSON(t *testing.T) {
	soft := int64(1700000000123)
	snap := CheckpointSnapshot{ElapsedMs: 5, Steps: 2, TokensIn: 10, TokensOut: 3, CostUSD: 0.25, ToolCalls: 1, LastTool: "Read", Description: "d"}
	hil := &HilRequest{RequestID: "hil_1", RunID: "run_1", ToolName: "Shell", Syscall: "shell.exec", Args: json.RawMessage(`{"input":"ls"}`)}
	tests := []struct {
		name string
		got  any
		want map[string]any
	}{
		{"run.started", RunStarted{Pid: "p_1", RunID: "run_1", ConversationID: "default"},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "default"}},
		{"run.started no conversation", RunStarted{Pid: "p_1", RunID: "run_1"},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": ""}},
		{"run.stream", RunText{Pid: "p_1", RunID: "run_1", ConversationID: "c", Text: "hi <&>"},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "text": "hi <&>"}},
		{"run.stream empty", RunText{Pid: "p_1", RunID: "run_1", ConversationID: "c"},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "text": ""}},
		{"run.output", RunOutput{Pid: "p_1", RunID: "run_1", ConversationID: "c", Text: "x", ToolCalls: 0},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "text": "x", "toolCalls": 0}},
		{"run.tool.started", ToolStarted{Pid: "p_1", RunID: "run_1", ConversationID: "c", CallID: "t1", ToolName: "Read", Syscall: "fs.read"},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "callId": "t1", "toolName": "Read", "syscall": "fs.read"}},
		{"run.tool.finished", ToolFinished{Pid: "p_1", RunID: "run_1", ConversationID: "c", CallID: "t1", ToolName: "Read"},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "callId": "t1", "toolName": "Read", "isError": false}},
		{"run.tool.finished error", ToolFinished{Pid: "p_1", RunID: "run_1", ConversationID: "c", CallID: "t1", ToolName: "Read", IsError: true},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "callId": "t1", "toolName": "Read", "isError": true}},
		{"run.hil.requested", HilRequested{Pid: "p_1", Request: hil},
			map[string]any{"pid": "p_1", "request": *hil}},
		{"run.checkpoint", RunCheckpointed{Pid: "p_1", RunID: "run_1", Seq: 1, Reason: "budget", Snapshot: snap, State: RunPaused},
			map[string]any{"pid": "p_1", "runId": "run_1", "seq": int64(1), "reason": "budget", "snapshot": snap, "state": RunPaused}},
		{"run.checkpoint soft", RunCheckpointed{Pid: "p_1", RunID: "run_1", Seq: 2, Reason: "supervised", Snapshot: snap, SoftContinueAt: &soft, State: RunAwaitingDecision},
			map[string]any{"pid": "p_1", "runId": "run_1", "seq": int64(2), "reason": "supervised", "snapshot": snap, "softContinueAt": soft, "state": RunAwaitingDecision}},
		{"run.directive", RunDirected{Pid: "p_1", RunID: "run_1", Seq: 1, Result: "delivered", Type: "continue", EffectsApplied: []string{"extend-budget"}},
			map[string]any{"pid": "p_1", "runId": "run_1", "seq": int64(1), "result": "delivered", "type": "continue", "effectsApplied": []string{"extend-budget"}}},
		{"run.directive no effects", RunDirected{Pid: "p_1", RunID: "run_1", Seq: 1, Result: "delivered", Type: "abort"},
			map[string]any{"pid": "p_1", "runId": "run_1", "seq": int64(1), "result": "delivered", "type": "abort", "effectsApplied": []string(nil)}},
		{"run.directive empty effects", RunDirected{Pid: "p_1", RunID: "run_1", Seq: 1, Result: "delivered", Type: "continue", EffectsApplied: []string{}},
			map[string]any{"pid": "p_1", "runId": "run_1", "seq": int64(1), "result": "delivered", "type": "continue", "effectsApplied": []string{}}},
		{"run.resumed", RunResumed{Pid: "p_1", RunID: "run_1", Seq: 3, How: "soft-continue"},
			map[string]any{"pid": "p_1", "runId": "run_1", "seq": int64(3), "how": "soft-continue"}},
		{"run.finished", RunFinished{Pid: "p_1", RunID: "run_1", ConversationID: "c", Status: RunCompleted},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "status": RunCompleted}},
		{"run.finished aborted", RunFinished{Pid: "p_1", RunID: "run_1", ConversationID: "c", Status: RunAborted, Aborted: true},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "status": RunAborted, "aborted": true}},
		{"run.finished error", RunFinished{Pid: "p_1", RunID: "run_1", ConversationID: "c", Status: RunFailed, Error: "boom"},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "status": RunFailed, "error": "boom"}},
		{"chat.complete", ChatComplete{Pid: "p_1", RunID: "run_1", ConversationID: "c", Status: RunCompleted},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "status": RunCompleted, "aborted": false}},
		{"chat.complete aborted", ChatComplete{Pid: "p_1", RunID: "run_1", ConversationID: "c", Status: RunAborted, Aborted: true},
			map[string]any{"pid": "p_1", "runId": "run_1", "conversationId": "c", "status": RunAborted, "aborted": true}},
		{"changed spawn", ProcChanged{Pid: "p_1", Change: "spawn", Profile: "task"},
			map[string]any{"pid": "p_1", "change": "spawn", "profile": "task"}},
		{"changed queue", ProcChanged{Pid: "p_1", Change: "queue", ConversationID: "c", RunID: "run_2"},
			map[string]any{"pid": "p_1", "change": "queue", "conversationId": "c", "runId": "run_2"}},
		{"changed hil", ProcChanged{Pid: "p_1", Change: "hil", RequestID: "hil_1", Decision: "approve"},
			map[string]any{"pid": "p_1", "change": "hil", "requestId": "hil_1", "decision": "approve"}},
		{"changed conversation.open", ProcChanged{Pid: "p_1", Change: "conversation.open", ConversationID: "c"},
			map[string]any{"pid": "p_1", "change": "conversation.open", "conversationId": "c"}},
		{"changed policy", ProcChanged{Pid: "p_1", Change: "policy", ConversationID: "c"},
			map[string]any{"pid": "p_1", "change": "policy", "conversationId": "c"}},
		{"lifecycle reset", ProcessLifecycle{Pid: "p_1", Event: "process.reset"},
			map[string]any{"pid": "p_1", "event": "process.reset"}},
		{"lifecycle checkpointed", ProcessLifecycle{Pid: "p_1", Event: "process.checkpointed", Paths: []string{"/a", "/b"}},
			map[string]any{"pid": "p_1", "event": "process.checkpointed", "paths": []string{"/a", "/b"}}},
		{"lifecycle conversation.reset", ProcessLifecycle{Pid: "p_1", Event: "conversation.reset", ConversationID: "c"},
			map[string]any{"pid": "p_1", "event": "conversation.reset", "conversationId": "c"}},
		{"lifecycle compacted", ProcessLifecycle{Pid: "p_1", Event: "conversation.compacted", ConversationID: "c", SegmentID: "seg_1", ArchivedMessages: 7},
			map[string]any{"pid": "p_1", "event": "conversation.compacted", "conversationId": "c", "segmentId": "seg_1", "archivedMessages": int64(7)}},
		{"lifecycle forked", ProcessLifecycle{Pid: "p_1", Event: "conversation.forked", ConversationID: "c", TargetConversationID: "fork-1"},
			map[string]any{"pid": "p_1", "event": "conversation.forked", "conversationId": "c", "targetConversationId": "fork-1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.got)
			if err != nil {
				t.Fatal(err)
			}
			want, err := json.Marshal(tt.want)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("payload JSON\n got %s\nwant %s", got, want)
			}
			s, ok := tt.got.(Scoped)
			if !ok {
				t.Fatalf("%T is not Scoped", tt.got)
			}
			pid, conv := s.SignalScope()
			wantConv, _ := tt.want["conversationId"].(string)
			if pid != tt.want["pid"] || conv != wantConv {
				t.Errorf("SignalScope = %q, %q; want %q, %q", pid, conv, tt.want["pid"], wantConv)
			}
		})
	}
}
