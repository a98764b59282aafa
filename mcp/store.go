package mcp

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// migrations are the room's schema steps: each user's servers, with what
// was last discovered on them (the cache every read serves).
var migrations = []string{
	`CREATE TABLE mcp_servers (
		server_id TEXT PRIMARY KEY,
		uid INTEGER NOT NULL,
		name TEXT NOT NULL,
		transport TEXT NOT NULL,
		url TEXT NOT NULL DEFAULT '',
		stdio TEXT NOT NULL DEFAULT '',
		headers TEXT NOT NULL DEFAULT '{}',
		narrow TEXT NOT NULL DEFAULT '',
		instructions TEXT,
		capabilities TEXT NOT NULL DEFAULT 'null',
		tools TEXT NOT NULL DEFAULT '[]',
		resources TEXT NOT NULL DEFAULT '[]',
		prompts TEXT NOT NULL DEFAULT '[]',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		UNIQUE (uid, name));`,
	// OAuth (sys.oauth.*, and an MCP server's sign-in): the flows under
	// way and the accounts with their tokens, their owner's secrets
	// (never answered by any call, never in a file of the namespace).
	`ALTER TABLE mcp_servers ADD COLUMN callback TEXT NOT NULL DEFAULT '';
	CREATE TABLE mcp_oauth_flows (
		flow_id TEXT PRIMARY KEY,
		state TEXT NOT NULL UNIQUE,
		uid INTEGER NOT NULL,
		kind TEXT NOT NULL,
		provider TEXT NOT NULL,
		account_key TEXT NOT NULL,
		label TEXT,
		auth_endpoint TEXT NOT NULL,
		token_endpoint TEXT NOT NULL,
		client_id TEXT NOT NULL,
		client_secret TEXT NOT NULL DEFAULT '',
		redirect_uri TEXT NOT NULL,
		scope TEXT,
		resource TEXT,
		verifier TEXT NOT NULL,
		auth_url TEXT NOT NULL,
		server_id TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		expires_at INTEGER NOT NULL);
	CREATE TABLE mcp_oauth_accounts (
		account_id TEXT PRIMARY KEY,
		uid INTEGER NOT NULL,
		kind TEXT NOT NULL,
		provider TEXT NOT NULL,
		account_key TEXT NOT NULL,
		label TEXT,
		scope TEXT,
		resource TEXT,
		client_id TEXT NOT NULL,
		client_secret TEXT NOT NULL DEFAULT '',
		token_endpoint TEXT NOT NULL,
		token_type TEXT NOT NULL,
		access_token TEXT NOT NULL,
		refresh_token TEXT NOT NULL DEFAULT '',
		expires_at INTEGER,
		server_id TEXT NOT NULL DEFAULT '',
		created_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL,
		last_used_at INTEGER,
		UNIQUE (uid, kind, provider, account_key));`,
}

// record is one server as the store keeps it.
type record struct {
	id        string
	uid       uint32
	name      string
	transport string
	url       string
	stdio     *abi.McpStdio
	headers   map[string]string
	// callback is the origin (scheme://host[:port]) of the OAuth
	// redirect of a sign-in this server needs, "" for the room's.
	callback string
	// narrow is the narrowing of the process capability of whoever added
	// it (a token's, a process's): the server's sessions are opened
	// within it, as a schedule's runs are.
	narrow *abi.ProcessCap

	// What was last discovered.
	instructions *string
	capabilities json.RawMessage
	tools        []abi.McpToolSummary
	resources    []abi.McpResourceSummary
	prompts      []abi.McpPromptSummary

	created, updated int64
}

// columns are what scan reads, in its order.
const columns = `server_id, uid, name, transport, url, stdio, headers, narrow, instructions, capabilities, tools, resources, prompts, created_at, updated_at, callback`

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// scan reads one record of columns. A cached part that does not decode
// reads as empty: the next discovery writes it again.
func scan(row rowScanner) (*record, error) {
	var r record
	var stdio, headers, narrow, caps, tools, resources, prompts string
	var instr sql.NullString
	if err := row.Scan(&r.id, &r.uid, &r.name, &r.transport, &r.url, &stdio, &headers, &narrow, &instr, &caps,
		&tools, &resources, &prompts, &r.created, &r.updated, &r.callback); err != nil {
		return nil, err
	}
	if stdio != "" {
		r.stdio = &abi.McpStdio{}
		if err := json.Unmarshal([]byte(stdio), r.stdio); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal([]byte(headers), &r.headers); err != nil {
		return nil, err
	}
	if narrow != "" {
		r.narrow = &abi.ProcessCap{}
		if err := json.Unmarshal([]byte(narrow), r.narrow); err != nil {
			return nil, err
		}
	}
	if instr.Valid {
		r.instructions = &instr.String
	}
	if caps != "null" && json.Valid([]byte(caps)) {
		r.capabilities = json.RawMessage(caps)
	}
	_ = json.Unmarshal([]byte(tools), &r.tools)
	_ = json.Unmarshal([]byte(resources), &r.resources)
	_ = json.Unmarshal([]byte(prompts), &r.prompts)
	return &r, nil
}

// errNoServer is what a lookup of a server that is not there returns.
var errNoServer = errors.New("no such server")

// byUser reads user uid's servers, by name.
func (m *Room) byUser(ctx context.Context, uid uint32) ([]*record, error) {
	rows, err := m.st.QueryContext(ctx, `SELECT `+columns+` FROM mcp_servers WHERE uid=? ORDER BY name`, uid)
	if err != nil {
		return nil, abi.E(err)
	}
	defer rows.Close()
	var out []*record
	for rows.Next() {
		r, err := scan(rows)
		if err != nil {
			return nil, abi.E(err)
		}
		out = append(out, r)
	}
	return out, wrap(rows.Err())
}

// callColumns are columns without what discovery found (instructions,
// capabilities, tools, resources, prompts: read as empty), for a call,
// which needs none of it and should not decode a large tool list each
// time.
const callColumns = `server_id, uid, name, transport, url, stdio, headers, narrow, NULL, 'null', '[]', '[]', '[]', created_at, updated_at, callback`

// find reads user uid's server whose id or name is key (errNoServer if
// there is none).
func (m *Room) find(ctx context.Context, uid uint32, key string) (*record, error) {
	return m.findColumns(ctx, columns, uid, key)
}

// findForCall is find without what discovery found (callColumns),
// answered from the room's cache of such records when it can be: a call
// then reads no table. The cache is emptied by every write of
// mcp_servers (insert, remove, saveDiscovery), and a read that raced a
// write is not kept.
func (m *Room) findForCall(ctx context.Context, uid uint32, key string) (*record, error) {
	ck := recKey{uid, key}
	m.cacheMu.Lock()
	r, ok := m.cache[ck]
	gen := m.cacheGen
	m.cacheMu.Unlock()
	if ok {
		c := *r
		return &c, nil
	}
	r, err := m.findColumns(ctx, callColumns, uid, key)
	if err != nil {
		return nil, err
	}
	m.cacheMu.Lock()
	if m.cacheGen == gen && len(m.cache) < maxCached {
		c := *r
		m.cache[ck] = &c
	}
	m.cacheMu.Unlock()
	return r, nil
}

// recKey is a findForCall: a user and the id or name they gave.
type recKey struct {
	uid uint32
	key string
}

// maxCached is how many records findForCall keeps at most.
const maxCached = 4096

// forget empties findForCall's cache: mcp_servers changed.
func (m *Room) forget() {
	m.cacheMu.Lock()
	m.cacheGen++
	clear(m.cache)
	m.cacheMu.Unlock()
}

// findColumns is find reading cols (columns or callColumns).
func (m *Room) findColumns(ctx context.Context, cols string, uid uint32, key string) (*record, error) {
	r, err := scan(m.st.QueryRowContext(ctx, `SELECT `+cols+` FROM mcp_servers WHERE uid=? AND (server_id=? OR name=?)`, uid, key, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoServer
	}
	if err != nil {
		return nil, abi.E(err)
	}
	return r, nil
}

// byID reads the server id (errNoServer if there is none).
func (m *Room) byID(ctx context.Context, id string) (*record, error) {
	r, err := scan(m.st.QueryRowContext(ctx, `SELECT `+columns+` FROM mcp_servers WHERE server_id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoServer
	}
	if err != nil {
		return nil, abi.E(err)
	}
	return r, nil
}

// jsonText is v as JSON text ("null" for nil).
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}

// insert adds r; a name its user has already is a 409.
func (m *Room) insert(ctx context.Context, r *record) error {
	stdio, narrow := "", ""
	if r.stdio != nil {
		stdio = jsonText(r.stdio)
	}
	if r.narrow != nil {
		narrow = jsonText(r.narrow)
	}
	headers := r.headers
	if headers == nil {
		headers = map[string]string{}
	}
	defer m.forget()
	return m.st.Tx(ctx, func(tx *kernel.Tx) error {
		var n int
		if err := m.st.TxQueryRow(tx, `SELECT count(*) FROM mcp_servers WHERE uid=? AND name=?`, r.uid, r.name).Scan(&n); err != nil {
			return abi.E(err)
		}
		if n > 0 {
			return abi.E(abi.Path(r.name), abi.Busy, "you have an MCP server of that name: remove it first, or pick another name")
		}
		_, err := m.st.TxExec(tx, `INSERT INTO mcp_servers (server_id, uid, name, transport, url, stdio, headers, narrow, created_at, updated_at, callback)
			VALUES (?,?,?,?,?,?,?,?,?,?,?)`, r.id, r.uid, r.name, r.transport, r.url, stdio, jsonText(headers), narrow, r.created, r.updated, r.callback)
		return wrap(err)
	})
}

// remove deletes server id; it reports whether there was one.
func (m *Room) remove(ctx context.Context, id string) (bool, error) {
	defer m.forget()
	res, err := m.st.Exec(ctx, `DELETE FROM mcp_servers WHERE server_id=?`, id)
	if err != nil {
		return false, abi.E(err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// saveDiscovery writes what a discovery found on server id.
func (m *Room) saveDiscovery(ctx context.Context, id string, d *discovery, now int64) error {
	defer m.forget()
	var instr any
	if d.instructions != nil {
		instr = *d.instructions
	}
	caps := "null"
	if len(d.capabilities) > 0 {
		caps = string(d.capabilities)
	}
	_, err := m.st.Exec(ctx, `UPDATE mcp_servers SET instructions=?, capabilities=?, tools=?, resources=?, prompts=?, updated_at=? WHERE server_id=?`,
		instr, caps, jsonText(orEmpty(d.tools)), jsonText(orEmpty(d.resources)), jsonText(orEmpty(d.prompts)), now, id)
	return wrap(err)
}

// orEmpty is s, or an empty slice for nil (JSON [] rather than null).
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// wrap is err as an *abi.Error, nil for nil.
func wrap(err error) error {
	if err == nil {
		return nil
	}
	return abi.E(err)
}
