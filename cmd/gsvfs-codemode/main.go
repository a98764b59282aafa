// Command gsvfs-codemode is the CodeMode worker: it runs one JavaScript
// block for the gsvfs daemon, which starts it and speaks JSON lines on its
// stdin and stdout (see package codemode). It is its own small binary so
// that a worker starts in a few milliseconds; a daemon that does not find
// it next to itself runs its own hidden codemode-worker command instead.
package main

import (
	"os"

	"gsvfs.dev/gsvfs/codemode"
)

func main() {
	os.Exit(codemode.WorkerMain())
}
