package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// A server's resource templates (resources/templates/list) are
// discovered beside its resources, counted apart, and read with
// arguments: the template expanded (RFC 6570) is the URI read. Bad
// arguments are a 400 that asks the server nothing.
func TestResourceTemplates(t *testing.T) {
	needSandbox(t)
	s := newSys(t)
	s.install(s.alice)
	sv := must(s, s.alice, abi.SysMcpAdd, stdioArgs("t", abi.NetworkNone)).Server
	if sv.ResourceCount != 1 || sv.ResourceTemplateCount != 1 {
		t.Fatalf("resources %d, templates %d; want 1 and 1", sv.ResourceCount, sv.ResourceTemplateCount)
	}
	d, err := kernel.Do(context.Background(), s.k, s.k.KernelCaller(), abi.SysMcpGet, &abi.McpGetArgs{Uid: s.alice.Uid, ServerID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	var tmpl *abi.McpResourceSummary
	for i, r := range d.Resources {
		if r.URITemplate != "" {
			tmpl = &d.Resources[i]
		}
	}
	if tmpl == nil || tmpl.URITemplate != "test://big/{bytes}" || tmpl.URI != "" || tmpl.Name != "big" {
		t.Fatalf("the template: %+v", d.Resources)
	}
	r := must(s, s.alice, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: "t", URI: tmpl.URITemplate, Arguments: map[string]string{"bytes": "7"}})
	var contents []struct{ URI, Text string }
	if err := json.Unmarshal(r.Contents, &contents); err != nil || len(contents) != 1 || len(contents[0].Text) != 7 || contents[0].URI != "test://big/7" {
		t.Fatalf("test://big/{bytes} with bytes=7: %s %v", r.Contents, err)
	}
	for _, c := range []struct {
		name string
		args map[string]string
		uri  string
		want string
	}{
		{"an argument missing", map[string]string{}, "test://big/{bytes}", "argument bytes is missing"},
		{"not a template", map[string]string{"a": "1"}, "test://big/{bytes", "not a resource template"},
	} {
		_, err := do(s, s.alice, abi.SysMcpResourceRead, &abi.McpResourceReadArgs{ServerID: "t", URI: c.uri, Arguments: c.args})
		if abi.KindOf(err) != abi.Invalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a 400 with %q", c.name, err, c.want)
		}
	}
}
