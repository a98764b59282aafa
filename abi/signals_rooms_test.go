package abi

import (
	"encoding/json"
	"testing"
)

// TestRoomSignalPayloadsJSON checks that the scheduler's and the notify
// room's signal payloads marshal byte for byte as the maps they replaced
// (the same keys, present in the same cases).
func TestRoomSignalPayloadsJSON(t *testing.T) {
	n := &Notification{NotificationID: "n_1", Title: "t", Level: "info", Actions: []NotificationAction{}}
	tests := []struct {
		name string
		got  any
		want map[string]any
	}{
		{"sched.changed", SchedChanged{ScheduleID: "s_1", Change: "added"},
			map[string]any{"scheduleId": "s_1", "change": "added"}},
		{"sched.run.finished", SchedRunFinished{ScheduleID: "s_1", Name: "nightly", Status: "ok"},
			map[string]any{"scheduleId": "s_1", "name": "nightly", "status": "ok", "error": ""}},
		{"sched.run.finished error", SchedRunFinished{ScheduleID: "s_1", Name: "nightly", Status: "error", Error: "boom"},
			map[string]any{"scheduleId": "s_1", "name": "nightly", "status": "error", "error": "boom"}},
		{"notification.created", NotificationSignal{Notification: n},
			map[string]any{"notification": n}},
		{"notification null", NotificationSignal{},
			map[string]any{"notification": (*Notification)(nil)}},
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
		})
	}
}
