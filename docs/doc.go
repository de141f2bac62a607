// Package docs is the documentation of dibs for operators and developers,
// in Markdown. It holds no code: its test checks the picture of the packages
// in architecture.md against the imports of the code, so the picture cannot
// drift from the house it draws.
package docs
