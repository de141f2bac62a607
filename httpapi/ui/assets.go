package ui

import (
	"embed"
	"io/fs"
)

//go:embed static
var static embed.FS

// Assets are the dashboard's files: index.html, app.css, charts.js and app.js, at the
// root of the file system.
var Assets fs.FS = mustSub(static, "static")

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err) // the directory is embedded: cannot happen
	}
	return sub
}
