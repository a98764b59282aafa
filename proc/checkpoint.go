package proc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// sysCheckpoint serves proc.checkpoint (ours): it writes the
// seed's continuity files into the process's workspace, or its working
// directory when it has none, as the caller:
//
//	.gsv/summary.md
//	.gsv/processes/<pid>/conversations/<cid>/chat.jsonl
//	.gsv/processes/<pid>/conversations/<cid>/segments.jsonl
//
// chat.jsonl is the active history (the history file's lines);
// segments.jsonl the conversation's segment records. Without a
// conversationId every conversation is checkpointed.
func (m *engine) sysCheckpoint(ctx context.Context, c *kernel.Caller, a *abi.CheckpointArgs) (*abi.CheckpointResult, error) {
	p, err := m.lookup(ctx, c, a.Pid)
	if err != nil {
		return nil, err
	}
	dir := p.Cwd
	if p.WorkspaceID != nil && *p.WorkspaceID != "" {
		dir = "/workspaces/" + *p.WorkspaceID
	}
	cids := []string{a.ConversationID}
	if a.ConversationID == "" {
		if cids, err = m.allConvs(ctx, p.Pid); err != nil {
			return nil, abi.E(abi.Path(p.Pid), err)
		}
	}
	write := func(path string, content []byte) error {
		res, err := kernel.Do(ctx, m.k, c, abi.FsWrite, &abi.FSWriteArgs{Path: path, Content: string(content)})
		if err != nil {
			return err
		}
		if !res.OK {
			return abi.E(abi.Path(path), abi.Permission, res.Error)
		}
		return nil
	}
	var paths []string
	var summary strings.Builder
	fmt.Fprintf(&summary, "# Process %s\n\nProfile %s, owner uid %d, checkpointed %s.\n\n## Conversations\n\n",
		p.Pid, p.Profile, p.Uid, time.Now().UTC().Format(time.RFC3339))
	for _, cid := range cids {
		conv, err := m.conv(ctx, p.Pid, cid)
		if err != nil {
			return nil, err
		}
		base := fmt.Sprintf("%s/.gsv/processes/%s/conversations/%s", dir, p.Pid, cid)
		var last string
		chat, err := m.renderHistory(ctx, c, p.Pid, cid, conv.Generation, func(b *bytes.Buffer, msg *abi.Message) {
			renderJSONLine(b, msg)
			if msg.Role == "assistant" {
				var ac assistantContent
				if json.Unmarshal(msg.Content, &ac) == nil && ac.Text != "" {
					last = ac.Text
				}
			}
		})
		if err != nil {
			return nil, err
		}
		var segs bytes.Buffer
		ss, err := m.segments(ctx, p.Pid, cid, "")
		if err != nil {
			return nil, abi.E(abi.Path(p.Pid+"/"+cid), err)
		}
		enc := json.NewEncoder(&segs)
		for _, s := range ss {
			if err := enc.Encode(s); err != nil {
				return nil, err
			}
		}
		for _, f := range []struct {
			path string
			data []byte
		}{{base + "/chat.jsonl", chat}, {base + "/segments.jsonl", segs.Bytes()}} {
			if err := write(f.path, f.data); err != nil {
				return nil, err
			}
			paths = append(paths, f.path)
		}
		title := "-"
		if conv.Title != nil {
			title = *conv.Title
		}
		fmt.Fprintf(&summary, "- %s (%s): generation %d, %d messages, %d segments\n", cid, title, conv.Generation, conv.MessageCount, len(ss))
		if last != "" {
			if len(last) > 2000 {
				last = last[:2000] + " …"
			}
			fmt.Fprintf(&summary, "\n  Last reply:\n\n  > %s\n\n", strings.ReplaceAll(last, "\n", "\n  > "))
		}
	}
	sp := dir + "/.gsv/summary.md"
	if err := write(sp, []byte(summary.String())); err != nil {
		return nil, err
	}
	paths = append([]string{sp}, paths...)
	signal(m, p.Uid, abi.SigProcessLifecycle, abi.ProcessLifecycle{Pid: p.Pid, Event: "process.checkpointed", Paths: paths})
	return &abi.CheckpointResult{OK: true, Pid: p.Pid, Paths: paths}, nil
}
