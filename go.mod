module gsvfs.dev/gsvfs

go 1.26

require (
	9fans.net/go v0.0.8-0.20250307142834-96bdba94b63f
	github.com/gorhill/cronexpr v0.0.0-20180427100037-88b0669f7d75
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/knusbaum/go9p v1.18.0
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/cobra v1.10.2
	modernc.org/sqlite v1.61.1
)
