// Package doccheck holds the repository's documentation checks: every
// relative link in the README, the contributing guide and docs/ names a
// file or directory that exists, so the guides stay true as files move.
package doccheck
