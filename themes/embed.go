// Package themes embeds Cairn's default theme so the binary needs no files
// besides the content it builds.
package themes

import (
	"embed"
	"io/fs"
)

//go:embed all:default
var embedded embed.FS

// Default returns the default theme: layouts/ and assets/.
func Default() fs.FS {
	sub, err := fs.Sub(embedded, "default")
	if err != nil {
		panic(err) // the embed pattern guarantees the folder exists
	}
	return sub
}
