package service

// The database backends the service and Migrate can open.
import (
	_ "github.com/dibsio/dibs/store/postgres"
	_ "github.com/dibsio/dibs/store/sqlite"
)
