// Package packages holds the builtin packages shipped with gsvfs: a
// directory per package, each with its gsv-package.json
// (docs/packages.md). The package room puts them into the builtin source
// repository (root/gsv-packages) when it starts and on pkg.sync.
package packages

import "embed"

// FS is the builtin packages' files.
//
//go:embed packages code-reviewer daily-digest
var FS embed.FS
