package main

// The database backends dibs serve and dibs migrate can open.
import (
	_ "github.com/dibsio/dibs/store/postgres"
	_ "github.com/dibsio/dibs/store/sqlite"
)
