package mcp

import (
	"sort"
	"strings"

	"gsvfs.dev/gsvfs/abi"
)

// search finds the tools of recs whose server name, tool name or
// description holds every word of query (case-insensitive; an empty
// query matches every tool), at most limit, ranked: more words found in
// the tool's name first, then by server and tool name.
func search(recs []*record, query string, limit int) []abi.McpFoundTool {
	words := strings.Fields(strings.ToLower(query))
	type hit struct {
		t     abi.McpFoundTool
		score int
	}
	var hits []hit
	for _, r := range recs {
		for _, t := range r.tools {
			name := strings.ToLower(r.name + " " + t.Name)
			desc := ""
			if t.Description != nil {
				desc = strings.ToLower(*t.Description)
			}
			score, all := 0, true
			for _, w := range words {
				switch {
				case strings.Contains(name, w):
					score += 2
				case strings.Contains(desc, w):
					score++
				default:
					all = false
				}
			}
			if all {
				hits = append(hits, hit{abi.McpFoundTool{ServerID: r.id, Server: r.name, McpToolSummary: t}, score})
			}
		}
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if hits[i].score != hits[j].score {
			return hits[i].score > hits[j].score
		}
		if hits[i].t.Server != hits[j].t.Server {
			return hits[i].t.Server < hits[j].t.Server
		}
		return hits[i].t.Name < hits[j].t.Name
	})
	out := []abi.McpFoundTool{}
	for i := 0; i < len(hits) && i < limit; i++ {
		out = append(out, hits[i].t)
	}
	return out
}
