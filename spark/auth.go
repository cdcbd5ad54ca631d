package spark

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Role is what an API credential may do. Each holder gets the least it
// needs:
//
//   - RoleHost: one host's agent. It reports that host's heartbeat,
//     checks fencing tokens on it, and releases the lease that holds it;
//     nothing for any other host.
//   - RoleAgent: a developer or a local agent, named. It asks for
//     development and service-start leases, attributed to its name, and
//     releases or cancels only its own.
//   - RoleOperator: an operator. It may also ask for CI classes without
//     a pull request, release or cancel any lease, check any host's
//     fencing, and terminate active work in an emergency.
//
// Pull-request work (a PR reference, the manual-pr class) enters only
// through the verified GitHub integration, never through the API.
type Role string

// The roles.
const (
	RoleHost     Role = "host"
	RoleAgent    Role = "agent"
	RoleOperator Role = "operator"
)

// Credential is who holds an API token.
type Credential struct {
	Role Role
	Name string // the host (RoleHost) or the person or agent
}

// Credentials resolves a bearer token to its holder.
type Credentials interface {
	Lookup(token string) (Credential, bool)
}

// HashToken is how a token is stored: "sha256:" and the hex SHA-256 of
// the token. A token file holds only these.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// NewToken returns a fresh random API token (32 bytes, hex).
func NewToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tokenTable is a set of hashed tokens.
type tokenTable map[[sha256.Size]byte]Credential

func (t tokenTable) Lookup(token string) (Credential, bool) {
	sum := sha256.Sum256([]byte(token))
	for h, c := range t { // every entry compared, in constant time each
		if subtle.ConstantTimeCompare(h[:], sum[:]) == 1 {
			return c, true
		}
	}
	return Credential{}, false
}

// TokenFile is Credentials kept in a file of lines
//
//	role name sha256:<hex>
//
// (# starts a comment), which the operator edits to add, rotate or
// revoke a token: the file is read again when it changes, so no restart
// is needed. A change is its content's: Lookup reads the file again at
// once when its size or modification time changed, and otherwise at most
// a second after it last read it, so that a file replaced by one of the
// same size and time (cp -p, rsync -t) takes effect within a second. A
// change that does not parse is rejected, reported by Err and to the
// ReportRejected hook, and takes effect only as a revocation: the tokens
// whose lines still stand unchanged keep working, a token whose line the
// edit removed or broke stops working, and no token is added until the
// file parses. Removing the file revokes every token it held.
type TokenFile struct {
	path     string
	mu       sync.Mutex
	mtime    time.Time
	size     int64
	sum      [sha256.Size]byte // of the content last taken; zero: none
	read     time.Time         // when the content was last read
	readErr  bool              // the last read failed (reported once)
	table    tokenTable
	parseErr error // why the content last taken does not parse
	lastErr  error
	report   func(error)
}

// tokenFileRecheck is how long Lookup trusts a token file whose size and
// modification time are unchanged before it reads the content again.
const tokenFileRecheck = time.Second

// TokenFileOption configures LoadTokenFile.
type TokenFileOption func(*TokenFile)

// ReportRejected calls fn with the reason each time a change of the file
// is rejected (once per change), for the operator's log or alerts.
func ReportRejected(fn func(error)) TokenFileOption {
	return func(f *TokenFile) { f.report = fn }
}

// LoadTokenFile reads a token file; it must parse.
func LoadTokenFile(path string, opts ...TokenFileOption) (*TokenFile, error) {
	f := &TokenFile{path: path}
	for _, o := range opts {
		o(f)
	}
	fi, data, err := f.readFile()
	if err != nil {
		return nil, err
	}
	if _, err := f.take(fi, data, time.Now()); err != nil {
		return nil, err
	}
	return f, nil
}

// The owners the controller's own integrations submit requests as: pull
// requests' work (spark/sparkgh), the merge queue's, each schedule's
// (OwnerSchedulePrefix and the schedule's name) and the agent tools'
// (spark/sparkmcp, with no owner configured), and the operator of a plain
// operator token (sparkd -token-file). The API treats a request
// whose owner is an agent credential's name as that agent's (it sees the
// lease's fencing token and may release it), so no agent or operator
// token is named like one of them (ReservedName).
const (
	OwnerGitHub         = "github"
	OwnerMergeQueue     = "merge-queue"
	OwnerSchedulePrefix = "schedule:"
	OwnerAgentTools     = "agent"
	OwnerOperator       = "operator"
)

// ReservedName reports whether name is, or may become, an owner the
// controller's integrations submit requests as: one of the Owner names in
// any case, or any name with a colon, the character their prefixes
// (OwnerSchedulePrefix, the agent tools' "agent:USER") end in.
func ReservedName(name string) bool {
	if strings.Contains(name, ":") {
		return true
	}
	for _, o := range []string{OwnerGitHub, OwnerMergeQueue, OwnerAgentTools, OwnerOperator} {
		if strings.EqualFold(name, o) {
			return true
		}
	}
	return false
}

// holderProblem is why role and name cannot hold a token ("" when they
// can). It never repeats a role that is not one, which may be a token
// pasted into the wrong field, nor a name with a colon.
func holderProblem(role Role, name string) string {
	switch {
	case !slices.Contains([]Role{RoleHost, RoleAgent, RoleOperator}, role):
		return "the first field is not a role: want host, agent or operator (a token is never written in the file: sparkd token prints the line to add)"
	case role == RoleHost:
		return ""
	case strings.Contains(name, ":"):
		return fmt.Sprintf("an %s's name may not contain a colon: names with one are the controller's own request owners (a schedule's is %sNAME), and a request's owner sees its lease's fencing token and may release it", role, OwnerSchedulePrefix)
	case ReservedName(name):
		return fmt.Sprintf("the name %q is reserved for the controller's own requests (pull requests', the merge queue's, the agent tools'), and a request's owner sees its lease's fencing token and may release it: name the %s after who holds the token", name, role)
	}
	return ""
}

// MinTokenLength is the shortest API token a controller accepts.
const MinTokenLength = 16

// OperatorToken is the operator's API token and the file holding it: the
// token in path, or, with no path, a fresh random one written (mode 0600)
// to dir/api-token. The token is never printed; one shorter than
// MinTokenLength is ErrInvalid.
func OperatorToken(path, dir string) (token, file string, err error) {
	if path == "" {
		token, path = NewToken(), filepath.Join(dir, "api-token")
		if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
			return "", "", fmt.Errorf("spark: operator token: %w", err)
		}
		return token, path, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", "", fmt.Errorf("spark: operator token: %w", err)
	}
	if token = strings.TrimSpace(string(data)); len(token) < MinTokenLength {
		return "", "", fmt.Errorf("%w: the API token in %s is shorter than %d characters", ErrInvalid, path, MinTokenLength)
	}
	return token, path, nil
}

// AddToken makes a fresh API token for one holder (role and name),
// appends its hash to the token file at path (created 0600 when missing;
// a running TokenFile reads it again) and returns the token, which the
// file never holds: show it once. A role that is not one of the three, an
// agent or operator named like the controller's own request owners
// (ReservedName), or a file that would no longer parse, is ErrInvalid and
// leaves the file as it was.
func AddToken(path string, role Role, name string) (string, error) {
	if why := holderProblem(role, name); why != "" {
		return "", fmt.Errorf("%w: %s", ErrInvalid, why)
	}
	tok := NewToken()
	line := fmt.Sprintf("%s %s %s\n", role, name, HashToken(tok))
	existing, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("spark: token file: %w", err)
	}
	if _, err := ParseTokens(append(existing, line...)); err != nil {
		return "", err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err == nil {
		_, err = f.WriteString(line)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return "", fmt.Errorf("spark: token file: %w", err)
	}
	return tok, nil
}

// ParseTokens parses token-file lines. A line must hold a role, a name
// and a token's hash; an agent or operator may not be named like the
// controller's own request owners (ReservedName). A refusal is ErrInvalid
// and names the line, never repeating a field that may be a token.
func ParseTokens(data []byte) (map[string]Credential, error) {
	out, errs := parseTokenLines(data)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return out, nil
}

// parseTokenLines parses every line it can and returns the errors of
// those it cannot, in line order.
func parseTokenLines(data []byte) (map[string]Credential, []error) {
	out := map[string]Credential{}
	dups := map[string]bool{}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("%w: token file line %d: %s", ErrInvalid, n, fmt.Sprintf(format, args...)))
		}
		if len(fields) != 3 {
			bad(`want "role name sha256:<hex>"`)
			continue
		}
		role, name, hash := Role(fields[0]), fields[1], fields[2]
		if why := holderProblem(role, name); why != "" {
			bad("%s", why)
			continue
		}
		raw, err := hex.DecodeString(strings.TrimPrefix(hash, "sha256:"))
		if !strings.HasPrefix(hash, "sha256:") || err != nil || len(raw) != sha256.Size {
			bad("the third field is a token's hash (sparkd token prints the line to add), never the token")
			continue
		}
		if _, dup := out[hash]; dup || dups[hash] {
			bad("the same token twice")
			dups[hash] = true
			delete(out, hash) // which holder is meant is unknown: neither
			continue
		}
		out[hash] = Credential{Role: role, Name: name}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%w: token file: %w", ErrInvalid, err))
	}
	return out, errs
}

func tableOf(entries map[string]Credential) tokenTable {
	t := tokenTable{}
	for hash, c := range entries {
		raw, _ := hex.DecodeString(strings.TrimPrefix(hash, "sha256:"))
		t[[sha256.Size]byte(raw)] = c
	}
	return t
}

// readFile reads the file's state and content.
func (f *TokenFile) readFile() (os.FileInfo, []byte, error) {
	fi, err := os.Stat(f.path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: token file: %w", ErrInvalid, err)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: token file: %w", ErrInvalid, err)
	}
	return fi, data, nil
}

// take makes data, read at now from a file in state fi, the file's
// content, unless it is the content already taken (changed is false). It
// returns why the content does not parse: such a content keeps, of the
// last good table, only the entries it still holds unchanged (a broken
// edit revokes, it never grants).
func (f *TokenFile) take(fi os.FileInfo, data []byte, now time.Time) (changed bool, err error) {
	f.mtime, f.size, f.read, f.readErr = fi.ModTime(), fi.Size(), now, false
	sum := sha256.Sum256(data)
	if f.table != nil && sum == f.sum {
		return false, f.parseErr
	}
	f.sum = sum
	entries, errs := parseTokenLines(data)
	if f.parseErr = nil; len(errs) == 0 {
		f.table = tableOf(entries)
		return true, nil
	}
	f.parseErr = fmt.Errorf("%w (%s); until it parses, only the tokens whose lines stand unchanged work", errs[0], f.path)
	if f.table == nil {
		return true, f.parseErr
	}
	kept := tokenTable{}
	for h, c := range tableOf(entries) {
		if old, ok := f.table[h]; ok && old == c {
			kept[h] = c
		}
	}
	f.table = kept
	return true, f.parseErr
}

// Lookup finds the token's holder, reading the file again first when it
// may have changed: at once when its size or modification time did, and
// otherwise once its content was last read a second ago or more (by the
// controller's clock).
func (f *TokenFile) Lookup(token string) (Credential, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := time.Now()
	fi, err := os.Stat(f.path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if len(f.table) > 0 {
			// The file was removed: every token in it is revoked.
			f.rejected(fmt.Errorf("%w: token file %s is gone: every token it held is revoked until it is back", ErrInvalid, f.path))
		}
		f.table, f.mtime, f.size, f.sum, f.parseErr = tokenTable{}, time.Time{}, -1, [sha256.Size]byte{}, nil
	case err == nil && (!fi.ModTime().Equal(f.mtime) || fi.Size() != f.size || now.Sub(f.read) >= tokenFileRecheck || now.Before(f.read)):
		f.refresh(now)
	}
	return f.table.Lookup(token)
}

// refresh reads the file again at now and takes its content when it
// changed, reporting a change it rejects once (and a failing read once
// until a read succeeds).
func (f *TokenFile) refresh(now time.Time) {
	fi, data, err := f.readFile()
	if err != nil {
		f.read = now
		if !f.readErr {
			f.readErr = true
			f.rejected(err)
		}
		return
	}
	switch changed, err := f.take(fi, data, now); {
	case !changed:
		f.lastErr = err // the same content (a touch, or a recheck): nothing new to report
	case err != nil:
		f.rejected(err)
	default:
		f.lastErr = nil
	}
}

func (f *TokenFile) rejected(err error) {
	f.lastErr = err
	if f.report != nil {
		f.report(err)
	}
}

// Err is why the last change of the file was not taken (nil when it was).
func (f *TokenFile) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastErr
}

// Tokens are fixed credentials by token, for a controller whose tokens
// are not in a file (tests, a single operator token).
type Tokens map[string]Credential

// Lookup finds the token's holder.
func (t Tokens) Lookup(token string) (Credential, bool) {
	table := tokenTable{}
	for tok, c := range t {
		table[sha256.Sum256([]byte(tok))] = c
	}
	return table.Lookup(token)
}

// AnyOf tries each Credentials in turn.
type AnyOf []Credentials

// Lookup finds the token's holder in the first that knows it.
func (a AnyOf) Lookup(token string) (Credential, bool) {
	for _, c := range a {
		if cred, ok := c.Lookup(token); ok {
			return cred, true
		}
	}
	return Credential{}, false
}

type credKey struct{}

func credentialOf(ctx context.Context) Credential {
	c, _ := ctx.Value(credKey{}).(Credential)
	return c
}

// forbidden is the refusal of a request its credential may not make.
func forbidden(c Credential, what string) error {
	return fmt.Errorf("%w: a %s credential (%s) may not %s", ErrUnauthorized, c.Role, c.Name, what)
}
