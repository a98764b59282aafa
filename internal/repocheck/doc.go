// Package repocheck holds no code, only the tests that keep the
// repository's own files true to each other: every relative link of
// README.md and docs/*.md leads to a file of the repository, the README
// lists every document, and the Makefile's targets take what the README
// says they take.
package repocheck
