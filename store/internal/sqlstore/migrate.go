package sqlstore

import (
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Migration is one numbered schema change, from migrations/NNNN_name.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// String is the migration's file name without the .sql: NNNN_name.
func (m Migration) String() string { return fmt.Sprintf("%04d_%s", m.Version, m.Name) }

// Migrations returns the migrations/NNNN_name.sql files of fsys (a
// backend's embedded files) numbered up to upTo, in version order.
func Migrations(fsys fs.FS, upTo int) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, path := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(path, "migrations/"), ".sql")
		num, name, ok := strings.Cut(base, "_")
		if !ok {
			return nil, fmt.Errorf("migration %s: name must be NNNN_name.sql", path)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", path, err)
		}
		body, err := fs.ReadFile(fsys, path)
		if err != nil {
			return nil, err
		}
		if v <= upTo {
			ms = append(ms, Migration{Version: v, Name: name, SQL: string(body)})
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}

// ApplyPending runs, in order, each of ms whose version applied does not
// hold: exec runs its SQL, then record notes its version. The backend
// calls it inside the transaction that read applied, so a failure leaves
// nothing half done.
func ApplyPending(ms []Migration, applied map[int]bool, exec, record func(Migration) error) error {
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if err := exec(m); err != nil {
			return fmt.Errorf("migration %s: %w", m, err)
		}
		if err := record(m); err != nil {
			return fmt.Errorf("migration %s: record: %w", m, err)
		}
	}
	return nil
}
