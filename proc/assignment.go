package proc

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"gsvfs.dev/gsvfs/abi"
)

// A process's assignment (the seed's ProcSpawnAssignment): the context
// files its spawner gave it, kept with its record (proc_processes
// .assignment, JSON) and put in its instructions for its whole life.

// assignmentStart is the process event that starts the run of an
// assignment with autoStart and no prompt.
const assignmentStart = "your assignment is in your instructions (Assignment): begin it"

// saveAssignment stores a (checked by abi.Assignment.Check) as pid's.
func (m *Manager) saveAssignment(ctx context.Context, pid string, a *abi.Assignment) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	_, err = m.st.Exec(ctx, `UPDATE proc_processes SET assignment=? WHERE pid=?`, string(b), pid)
	return err
}

// assignmentPrompt writes pid's assignment into its instructions: each
// context file a section of its own. A process without one writes
// nothing; one that does not parse is logged and left out.
func (m *engine) assignmentPrompt(ctx context.Context, b *strings.Builder, pid string) {
	var raw sql.NullString
	err := m.st.QueryRowContext(ctx, `SELECT assignment FROM proc_processes WHERE pid=?`, pid).Scan(&raw)
	if err != nil {
		if !errors.Is(err, sql.ErrNoRows) && ctx.Err() == nil {
			m.log.Error("proc: read an assignment", "pid", pid, "err", err)
		}
		return
	}
	if !raw.Valid || raw.String == "" {
		return
	}
	var a abi.Assignment
	if err := json.Unmarshal([]byte(raw.String), &a); err != nil {
		m.log.Error("proc: an assignment does not parse", "pid", pid, "err", err)
		return
	}
	if len(a.ContextFiles) == 0 {
		return
	}
	b.WriteString("\n# Assignment\nWhoever spawned you gave you these context files: they are your task and its context.\n")
	for _, f := range a.ContextFiles {
		fmt.Fprintf(b, "\n## %s\n%s\n", f.Name, f.Text)
	}
}
