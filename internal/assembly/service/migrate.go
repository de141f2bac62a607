package service

import (
	"context"
	"fmt"

	"github.com/dibsio/dibs/store"
)

// Migrate applies the database schema at dbURL. Its errors name the
// database with the password hidden.
func Migrate(ctx context.Context, dbURL string) error {
	st, err := openStore(ctx, dbURL)
	if err != nil {
		return err
	}
	_ = st.Close() // the schema is committed; nothing is lost if closing fails
	return nil
}

// openStore opens the database at dbURL and brings its schema up to date.
func openStore(ctx context.Context, dbURL string) (store.Store, error) {
	st, err := store.Open(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("database %s: %w", RedactURL(dbURL), err)
	}
	if err := st.Migrate(ctx); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("database %s: migrate: %w", RedactURL(dbURL), err)
	}
	return st, nil
}
