// Package doccheck holds the repository's documentation checks: every
// relative link in the README, the contributing guide and docs/ names a
// file or directory that exists, and a link's #fragment a heading of the
// file it links to, so the guides stay true as files and sections move.
package doccheck
