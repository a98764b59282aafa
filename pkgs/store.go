package pkgs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"

	"gsvfs.dev/gsvfs/abi"
	"gsvfs.dev/gsvfs/kernel"
)

// migrations are the room's schema steps: the packages, and each user's
// catalog remotes.
func migrations() []string {
	return []string{
		`CREATE TABLE pkg_packages (
		id TEXT PRIMARY KEY,
		scope TEXT NOT NULL,
		owner_uid INTEGER NOT NULL,
		name TEXT NOT NULL,
		builtin INTEGER NOT NULL DEFAULT 0,
		repo TEXT NOT NULL,
		remote_url TEXT NOT NULL DEFAULT '',
		ref TEXT NOT NULL,
		subdir TEXT NOT NULL,
		commit_hash TEXT NOT NULL,
		manifest TEXT NOT NULL,
		enabled INTEGER NOT NULL DEFAULT 0,
		review_required INTEGER NOT NULL DEFAULT 1,
		approved_at INTEGER NOT NULL DEFAULT 0,
		approved_by TEXT NOT NULL DEFAULT '',
		approved_commit TEXT NOT NULL DEFAULT '',
		approved_powers TEXT NOT NULL DEFAULT '[]',
		installed TEXT NOT NULL DEFAULT '{}',
		public INTEGER NOT NULL DEFAULT 0,
		installed_at INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	);
	CREATE INDEX pkg_scope ON pkg_packages(owner_uid, name);`,
		`CREATE TABLE pkg_remotes (
		owner_uid INTEGER NOT NULL,
		name TEXT NOT NULL,
		base_url TEXT NOT NULL,
		PRIMARY KEY (owner_uid, name)
	);`,
	}
}

// record is one package row.
type record struct {
	id, scope, name                string
	uid                            uint32
	builtin, enabled, reviewNeeded bool
	repo, remoteURL, ref, subdir   string
	commit                         string
	manifest                       abi.PkgManifest
	approvedAt                     int64
	approvedBy, approvedCommit     string
	approvedPowers                 []string
	installed                      installed
	public                         bool
	installedAt, updatedAt         int64
}

// installed is what an active package added to the other rooms, as its
// owner, so that disabling it removes exactly that.
type installed struct {
	Commands   []string `json:"commands,omitempty"`   // files written under the owner's bin directory
	Schedules  []string `json:"schedules,omitempty"`  // crontab line names
	McpServers []string `json:"mcpServers,omitempty"` // registered server names
}

const columns = `id,scope,owner_uid,name,builtin,repo,remote_url,ref,subdir,commit_hash,manifest,enabled,review_required,
	approved_at,approved_by,approved_commit,approved_powers,installed,public,installed_at,updated_at`

// scan reads one row of columns.
func scan(row interface{ Scan(...any) error }) (*record, error) {
	var r record
	var man, powers, inst string
	if err := row.Scan(&r.id, &r.scope, &r.uid, &r.name, &r.builtin, &r.repo, &r.remoteURL, &r.ref, &r.subdir, &r.commit, &man,
		&r.enabled, &r.reviewNeeded, &r.approvedAt, &r.approvedBy, &r.approvedCommit, &powers, &inst, &r.public,
		&r.installedAt, &r.updatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(man), &r.manifest); err != nil {
		return nil, abi.E(abi.Path(r.id), "stored manifest: "+err.Error())
	}
	if err := json.Unmarshal([]byte(powers), &r.approvedPowers); err != nil {
		return nil, abi.E(abi.Path(r.id), "stored powers: "+err.Error())
	}
	if err := json.Unmarshal([]byte(inst), &r.installed); err != nil {
		return nil, abi.E(abi.Path(r.id), "stored parts: "+err.Error())
	}
	return &r, nil
}

// get is the package id, or nil.
func (r *Room) get(ctx context.Context, id string) (*record, error) {
	rec, err := scan(r.st.QueryRowContext(ctx, `SELECT `+columns+` FROM pkg_packages WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	return rec, err
}

// listWhere is the packages a clause picks, by scope then name.
func (r *Room) listWhere(ctx context.Context, where string, args ...any) ([]*record, error) {
	rows, err := r.st.QueryContext(ctx, `SELECT `+columns+` FROM pkg_packages `+where+` ORDER BY owner_uid DESC, name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*record
	for rows.Next() {
		rec, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, rows.Err()
}

// put writes rec whole (insert or replace).
func (r *Room) put(ctx context.Context, rec *record) error {
	man, err := json.Marshal(rec.manifest)
	if err != nil {
		return err
	}
	if rec.approvedPowers == nil {
		rec.approvedPowers = []string{}
	}
	powers, _ := json.Marshal(rec.approvedPowers)
	inst, _ := json.Marshal(rec.installed)
	return r.st.Tx(ctx, func(tx *kernel.Tx) error {
		_, err := r.st.TxExec(tx, `INSERT INTO pkg_packages(`+columns+`) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT(id) DO UPDATE SET builtin=excluded.builtin, repo=excluded.repo, remote_url=excluded.remote_url,
			ref=excluded.ref, subdir=excluded.subdir, commit_hash=excluded.commit_hash, manifest=excluded.manifest,
			enabled=excluded.enabled, review_required=excluded.review_required, approved_at=excluded.approved_at,
			approved_by=excluded.approved_by, approved_commit=excluded.approved_commit, approved_powers=excluded.approved_powers,
			installed=excluded.installed, public=excluded.public, updated_at=excluded.updated_at`,
			rec.id, rec.scope, rec.uid, rec.name, rec.builtin, rec.repo, rec.remoteURL, rec.ref, rec.subdir, rec.commit, string(man),
			rec.enabled, rec.reviewNeeded, rec.approvedAt, rec.approvedBy, rec.approvedCommit, string(powers), string(inst), rec.public,
			rec.installedAt, rec.updatedAt)
		return err
	})
}

// deleteBuiltin deletes a stale builtin package row.
func (r *Room) deleteBuiltin(ctx context.Context, id string) error {
	_, err := r.st.Exec(ctx, `DELETE FROM pkg_packages WHERE id=? AND builtin=1`, id)
	return err
}

// remotes are uid's catalog remotes, by name.
func (r *Room) remotes(ctx context.Context, uid uint32) ([]abi.PkgRemote, error) {
	rows, err := r.st.QueryContext(ctx, `SELECT name, base_url FROM pkg_remotes WHERE owner_uid=? ORDER BY name`, uid)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []abi.PkgRemote{}
	for rows.Next() {
		var rm abi.PkgRemote
		if err := rows.Scan(&rm.Name, &rm.BaseURL); err != nil {
			return nil, err
		}
		out = append(out, rm)
	}
	return out, rows.Err()
}

// putRemote stores uid's remote; changed is false when it was there as is.
func (r *Room) putRemote(ctx context.Context, uid uint32, rm abi.PkgRemote) (changed bool, err error) {
	err = r.st.Tx(ctx, func(tx *kernel.Tx) error {
		var old string
		err := r.st.TxQueryRow(tx, `SELECT base_url FROM pkg_remotes WHERE owner_uid=? AND name=?`, uid, rm.Name).Scan(&old)
		if err == nil && old == rm.BaseURL {
			return nil
		}
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		changed = true
		_, err = r.st.TxExec(tx, `INSERT INTO pkg_remotes(owner_uid,name,base_url) VALUES(?,?,?)
			ON CONFLICT(owner_uid,name) DO UPDATE SET base_url=excluded.base_url`, uid, rm.Name, rm.BaseURL)
		return err
	})
	return changed, err
}

// deleteRemote removes uid's remote name.
func (r *Room) deleteRemote(ctx context.Context, uid uint32, name string) (bool, error) {
	res, err := r.st.Exec(ctx, `DELETE FROM pkg_remotes WHERE owner_uid=? AND name=?`, uid, name)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}
