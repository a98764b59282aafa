//go:build race

package main_test

// raceEnabled says the tests were built with -race; the daemon binaries
// then are too.
const raceEnabled = true
