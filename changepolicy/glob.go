package changepolicy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/bmatcuk/doublestar/v4"
)

// Sentinels for the glob problems Load and Compile refuse; every one of
// them also matches ErrInvalidPolicy. GlobError carries the detail.
var (
	// ErrInvalidGlob: the pattern is malformed (empty, absolute, not UTF-8,
	// an unbalanced [ or {, a trailing backslash).
	ErrInvalidGlob = errors.New("changepolicy: invalid glob")
	// ErrUnsupportedGlob: the pattern uses syntax that other matchers
	// (picomatch, so dorny/paths-filter, and bash) read differently from
	// this one: extglobs, POSIX classes, brace ranges, regex groups, a
	// leading "./", a trailing "/". It is refused rather than matched
	// differently; GlobError.Rewrite suggests the supported spelling.
	ErrUnsupportedGlob = errors.New("changepolicy: unsupported glob syntax")
	// ErrNeverMatches: a glob, or a whole set, can match no path a diff
	// lists (a set of exclusions only, an exclusion that removes nothing,
	// a "." or ".." segment, an empty class).
	ErrNeverMatches = errors.New("changepolicy: glob can never match")
	// ErrRefinesOutsideCI: a gpu.device_control or gpu.hosted_only glob
	// matches a path that the ci set does not hold. Those lists only
	// refine CI paths; GlobError.Example names such a path.
	ErrRefinesOutsideCI = errors.New("changepolicy: gpu glob reaches outside ci")
)

// GlobError describes one refused glob. It wraps its sentinel (Err), and a
// Load error wrapping it is a *PolicyError as well.
type GlobError struct {
	Section string // "docs", "ci", "code", "gpu.device_control", "gpu.hosted_only" or "lanes.NAME.triggers"
	Index   int    // the glob's position in its section
	Line    int    // 1-based line in the policy file; 0 for a policy built by hand
	Glob    Glob   // as written, "!" included
	Err     error  // ErrInvalidGlob, ErrUnsupportedGlob, ErrNeverMatches or ErrRefinesOutsideCI
	// Construct names what was refused, one of the names the package
	// documentation lists (such as "extglob" or "outside-ci"), for
	// callers and tests that branch on it.
	Construct string
	Reason    string // what is wrong
	Rewrite   string // a supported spelling to use instead, when there is one
	Example   string // a path that shows the problem: for ErrRefinesOutsideCI one the glob matches and ci does not
}

// Error names the section, glob and line, says what is wrong and what to
// write instead.
func (e *GlobError) Error() string { return "changepolicy: " + e.message(true) }

// message is the error without the package prefix; the line is left out
// where a PolicyError around it names the line already.
func (e *GlobError) message(line bool) string {
	var b strings.Builder
	if e.Section != "" {
		fmt.Fprintf(&b, "%s[%d] ", e.Section, e.Index)
	}
	fmt.Fprintf(&b, "glob %q", string(e.Glob))
	if line && e.Line > 0 {
		fmt.Fprintf(&b, " (line %d)", e.Line)
	}
	b.WriteString(": " + e.Reason)
	if e.Rewrite != "" {
		fmt.Fprintf(&b, "; write %s", e.Rewrite)
	}
	return b.String()
}

// Unwrap returns the sentinel.
func (e *GlobError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInvalidPolicy: a refused glob makes the
// policy invalid.
func (e *GlobError) Is(target error) bool { return target == ErrInvalidPolicy }

// maxExpansions bounds the brace alternatives one glob may expand to.
const maxExpansions = 256

// Token kinds of a parsed glob.
const (
	tLit      = iota // one literal rune
	tSlash           // the separator
	tAny             // ?
	tStar            // * (a run of stars that is not a whole-segment **)
	tGlobstar        // ** as a whole segment
	tClass           // [...]
	tAlt             // {a,b}: only before expansion
)

// runeRange is an inclusive range of runes.
type runeRange struct{ lo, hi rune }

type token struct {
	kind   int
	r      rune        // tLit
	neg    bool        // tClass
	ranges []runeRange // tClass: as written
	dual   string      // tClass: its text, when picomatch also matches the text literally
	alts   [][]token   // tAlt
}

// glob is a parsed, checked policy glob.
type glob struct {
	raw     string
	negate  bool
	exps    [][]token // brace-free alternatives, star runs merged, ** resolved
	pattern []string  // exps rendered for doublestar, one pattern each
	re      string    // the language as an RE2 expression (no anchors), for the analysis
	lang    *lang     // re compiled, once the checks need it
}

// globProblem is a refusal before it is placed in a section.
type globProblem struct {
	err                        error
	construct, reason, rewrite string
}

func problem(err error, construct, rewrite, format string, args ...any) *globProblem {
	return &globProblem{err: err, construct: construct, reason: fmt.Sprintf(format, args...), rewrite: rewrite}
}

func (p *globProblem) in(section string, index, line int, raw string) *GlobError {
	return &GlobError{Section: section, Index: index, Line: line, Glob: Glob(raw), Err: p.err, Construct: p.construct, Reason: p.reason, Rewrite: p.rewrite}
}

func quote(s string) string { return strconv.Quote(s) }

// parseGlob parses and checks one glob as written in a policy. A refusal
// offers only a rewrite that parses in turn.
func parseGlob(raw string) (*glob, *globProblem) {
	g, p := parseOne(raw)
	if p != nil {
		p.rewrite = checkedRewrite(p.rewrite)
	}
	return g, p
}

// maxRewrites bounds how often a rewrite is itself rewritten.
const maxRewrites = 4

// checkedRewrite returns rewrite with each glob it quotes replaced by one
// that parses: the glob itself, or what its own refusal suggests (a few
// times over). It returns "" when some glob never gets there: a suggestion
// that Load refuses in turn is no suggestion.
func checkedRewrite(rewrite string) string {
	var b strings.Builder
	for rest := rewrite; rest != ""; {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:i])
		q, err := strconv.QuotedPrefix(rest[i:])
		if err != nil {
			return ""
		}
		rest = rest[i+len(q):]
		g, _ := strconv.Unquote(q)
		ok := false
		for range maxRewrites {
			_, p := parseOne(g)
			if p == nil {
				ok = true
				break
			}
			next := rewriteGlobs(p.rewrite)
			if len(next) != 1 {
				break
			}
			g = next[0]
		}
		if !ok {
			return ""
		}
		b.WriteString(quote(g))
	}
	return b.String()
}

// rewriteGlobs lists the globs a rewrite suggests, in order: the Go-quoted
// strings in its text.
func rewriteGlobs(rewrite string) []string {
	var out []string
	for rest := rewrite; ; {
		i := strings.IndexByte(rest, '"')
		if i < 0 {
			return out
		}
		q, err := strconv.QuotedPrefix(rest[i:])
		if err != nil {
			return out
		}
		g, _ := strconv.Unquote(q)
		out = append(out, g)
		rest = rest[i+len(q):]
	}
}

// parseOne is parseGlob without the check of the rewrite.
func parseOne(raw string) (*glob, *globProblem) {
	body, negate := strings.CutPrefix(raw, "!")
	switch {
	case body == "":
		return nil, problem(ErrInvalidGlob, "empty", `"docs/**"`, "the glob is empty")
	case !utf8.ValidString(body):
		return nil, problem(ErrInvalidGlob, "not-utf8", "", "the glob is not valid UTF-8")
	case strings.HasPrefix(body, "!"):
		rest := strings.TrimLeft(raw, "!")
		return nil, problem(ErrUnsupportedGlob, "double-negation", quote(bang((len(raw)-len(rest))%2 == 1)+rest), "a glob starts with at most one '!' (an exclusion); picomatch reads each further '!' as a negation of the negation")
	case strings.HasPrefix(body, "./"):
		rest := body
		for strings.HasPrefix(rest, "./") {
			rest = strings.TrimLeft(rest[2:], "/")
		}
		return nil, problem(ErrUnsupportedGlob, "leading-dot-slash", quote(bang(negate)+rest), "a leading './': diffs list repository-relative paths without one")
	case strings.HasPrefix(body, "/"):
		return nil, problem(ErrInvalidGlob, "absolute", quote(bang(negate)+strings.TrimLeft(body, "/")), "the glob is absolute: patterns match repository-relative paths, drop the leading slash")
	case !doublestar.ValidatePattern(body):
		return nil, problem(ErrInvalidGlob, "malformed", "", "not a valid doublestar pattern (unbalanced [] or {}, an empty [], or a trailing backslash)")
	}
	if p := unsupported(raw, body, negate); p != nil {
		return nil, p
	}
	ps := &parser{s: body}
	toks, p := ps.seq(false)
	if p != nil {
		return nil, p
	}
	g := &glob{raw: raw, negate: negate}
	var exps [][]token
	if err := expand(toks, []token{}, &exps); err != nil {
		return nil, err
	}
	res := make([]string, 0, len(exps))
	for _, e := range exps {
		if len(e) == 0 {
			continue // "{,a}": the empty alternative matches no path
		}
		e = normalize(e)
		if p := checkSegments(raw, e); p != nil {
			return nil, p
		}
		g.exps = append(g.exps, e)
	}
	for _, e := range g.exps {
		g.pattern = append(g.pattern, render(e))
	}
	// picomatch matches a path equal to the glob's text first, whatever
	// the glob means ("app/[id]/page.tsx" matches that file).
	if checkPath(body) == "" && !slices.ContainsFunc(g.pattern, func(p string) bool { return doublestar.MatchUnvalidated(p, body) }) {
		var e []token
		for _, r := range body {
			if r == '/' {
				e = append(e, token{kind: tSlash})
			} else {
				e = append(e, token{kind: tLit, r: r})
			}
		}
		g.exps = append(g.exps, e)
		g.pattern = append(g.pattern, render(e))
	}
	for _, e := range g.exps {
		res = append(res, regex(e))
	}
	g.re = strings.Join(res, "|")
	return g, nil
}

func bang(negate bool) string {
	if negate {
		return "!"
	}
	return ""
}

var (
	extglobRe    = regexp.MustCompile(`(^|[^\\])([@+!?*])\(`)
	posixRe      = regexp.MustCompile(`\[:([a-z]+):\]`)
	braceRangeRe = regexp.MustCompile(`\{(-?[0-9]+|[A-Za-z])\.\.(-?[0-9]+|[A-Za-z])(\.\.-?[0-9]+)?\}`)
)

var posixClasses = map[string]string{
	"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "ascii": `\x00-\x7f`, "blank": ` \t`,
	"cntrl": `\x00-\x1f\x7f`, "digit": "0-9", "graph": `!-~`, "lower": "a-z",
	"print": ` -~`, "punct": `!-/:-@\[-` + "`" + `{-~`, "space": ` \t\r\n\v\f`,
	"upper": "A-Z", "word": "A-Za-z0-9_", "xdigit": "A-Fa-f0-9",
}

// unsupported refuses, with a rewrite where one exists, the syntax that
// picomatch (and so dorny/paths-filter) or bash read differently.
func unsupported(raw, body string, negate bool) *globProblem {
	if m := extglobRe.FindStringSubmatchIndex(raw); m != nil {
		op := raw[m[4]:m[5]]
		open := m[5]
		closeAt := matchingParen(raw, open)
		inner := ""
		if closeAt > 0 {
			inner = raw[open+1 : closeAt]
		}
		alts := strings.Split(inner, "|")
		pre, post := raw[:m[4]], ""
		if closeAt > 0 {
			post = raw[closeAt+1:]
		}
		rewrite := ""
		switch {
		case closeAt < 0 || strings.ContainsAny(inner, "()"):
		case op == "@":
			rewrite = quote(pre + braces(alts) + post)
		case op == "?":
			rewrite = quote(pre + braces(append(alts, "")) + post)
		case op == "!" && pre == "" && post == "":
			var ex []string
			for _, a := range alts {
				ex = append(ex, quote("!"+a))
			}
			rewrite = `["**", ` + strings.Join(ex, ", ") + "]"
		}
		what := map[string]string{
			"@": "matches one of the alternatives", "?": "matches zero or one of them",
			"+": "matches one or more of them", "*": "matches zero or more of them", "!": "matches anything but them",
		}[op]
		reason := fmt.Sprintf("%s(…) is an extglob (in picomatch and bash it %s), which this matcher does not support", op, what)
		if rewrite == "" {
			reason += "; list the alternatives you mean with {a,b}, or escape a literal parenthesis as \\("
		}
		return problem(ErrUnsupportedGlob, "extglob", rewrite, "%s", reason)
	}
	if m := posixRe.FindStringSubmatchIndex(body); m != nil {
		name, text := body[m[2]:m[3]], body[m[0]:m[1]]
		rewrite := ""
		// Inside a bracket expression, the class's ranges replace it.
		if repl, ok := posixClasses[name]; ok && strings.LastIndexByte(body[:m[0]], '[') > strings.LastIndexByte(body[:m[0]], ']') {
			rewrite = quote(raw[:len(raw)-len(body)] + body[:m[0]] + repl + body[m[1]:])
		}
		return problem(ErrUnsupportedGlob, "posix-class", rewrite, "%s is a POSIX character class, which this matcher reads as the characters ':', %q, ...", text, name)
	}
	if m := braceRangeRe.FindStringSubmatchIndex(body); m != nil {
		lit := body[m[0]:m[1]]
		rewrite := ""
		if vals := braceRange(body[m[2]:m[3]], body[m[4]:m[5]], strings.TrimPrefix(sub(body, m[6], m[7]), "..")); vals != nil {
			rewrite = quote(bang(negate) + body[:m[0]] + braces(vals) + body[m[1]:])
		}
		return problem(ErrUnsupportedGlob, "brace-range", rewrite, "%s is a brace range (bash and picomatch expand it), which this matcher reads as the literal text", lit)
	}
	if i := unescapedIndex(body, '('); i >= 0 {
		if j := matchingParen(body, i); j > 0 {
			inner := body[i+1 : j]
			rewrite := quote(raw[:len(raw)-len(body)]+body[:i]+`\(`+inner+`\)`+body[j+1:]) + " for the parentheses"
			switch {
			case strings.ContainsAny(inner, "()"):
				rewrite = ""
			case strings.Contains(inner, "|"):
				rewrite = quote(bang(negate) + body[:i] + braces(strings.Split(inner, "|")) + body[j+1:])
			}
			return problem(ErrUnsupportedGlob, "regex-group", rewrite, "%s is a regex group in picomatch (it matches without the parentheses), but literal text here", body[i:j+1])
		}
	}
	if strings.ContainsRune(body, '"') {
		return problem(ErrUnsupportedGlob, "quotes", quote(unquote(raw)), "picomatch reads \"…\" as quoted literal text, this matcher the quote characters themselves")
	}
	if strings.Contains(body, `\\\\`) {
		return problem(ErrUnsupportedGlob, "repeated-backslash", "", "repeated escaped backslashes: picomatch collapses them (\"a\\\\\\\\b\" matches \"a\\b\"), this matcher does not")
	}
	for i := 0; i < len(body); i++ {
		switch c := body[i]; {
		case c == '\\' && i+1 < len(body):
			n := body[i+1]
			if isDigit(n) || ('a' <= n|0x20 && n|0x20 <= 'z') {
				return problem(ErrUnsupportedGlob, "regex-escape", quote(raw[:len(raw)-len(body)]+body[:i]+body[i+1:]), "\\%c is a regex escape in picomatch (\\b a word boundary, \\d a digit), and %q here; escape only punctuation", n, n)
			}
			i++
		case c == '|':
			return problem(ErrUnsupportedGlob, "regex-alternation", quote(raw[:len(raw)-len(body)]+body[:i]+`\|`+body[i+1:])+" for a literal '|', or {a,b} for alternatives",
				"'|' is regex alternation in picomatch, and a literal '|' here")
		case c == '+' && i > 0 && strings.IndexByte("]})", body[i-1]) >= 0 && (i < 2 || body[i-2] != '\\'):
			return problem(ErrUnsupportedGlob, "regex-quantifier", quote(raw[:len(raw)-len(body)]+body[:i]+`\+`+body[i+1:])+" for a literal '+'",
				"'+' after %q is a regex quantifier in picomatch (one or more of it), and a literal '+' here", body[i-1])
		}
	}
	if i := strings.Index(body, `\/`); i >= 0 {
		return problem(ErrUnsupportedGlob, "escaped-slash", quote(strings.ReplaceAll(raw, `\/`, "/")), "an escaped '/' is still the separator; write it without the backslash")
	}
	return nil
}

// unquote drops picomatch's quotes and escapes what they quoted.
func unquote(s string) string {
	var b strings.Builder
	in := false
	for _, r := range s {
		switch {
		case r == '"':
			in = !in
		case in && strings.ContainsRune(`*?[]{}\`, r):
			b.WriteRune('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func sub(s string, i, j int) string {
	if i < 0 {
		return ""
	}
	return s[i:j]
}

func braces(alts []string) string { return "{" + strings.Join(alts, ",") + "}" }

// braceRange lists a small brace range's values, or nil.
func braceRange(from, to, step string) []string {
	st := 1
	if step != "" {
		n, err := strconv.Atoi(step)
		if err != nil || n == 0 {
			return nil
		}
		st = max(n, -n)
	}
	if len(from) == 1 && len(to) == 1 && !isDigit(from[0]) && !isDigit(to[0]) {
		lo, hi := rune(from[0]), rune(to[0])
		var out []string
		for r := lo; ; {
			out = append(out, string(r))
			if r == hi || len(out) > 32 {
				break
			}
			if lo <= hi {
				r += rune(st)
				if r > hi {
					break
				}
			} else {
				r -= rune(st)
				if r < hi {
					break
				}
			}
		}
		if len(out) > 32 {
			return nil
		}
		return out
	}
	lo, err1 := strconv.Atoi(from)
	hi, err2 := strconv.Atoi(to)
	if err1 != nil || err2 != nil || max(hi-lo, lo-hi)/st > 32 {
		return nil
	}
	width := 0
	if (len(strings.TrimPrefix(from, "-")) > 1 && strings.TrimPrefix(from, "-")[0] == '0') || (len(strings.TrimPrefix(to, "-")) > 1 && strings.TrimPrefix(to, "-")[0] == '0') {
		width = max(len(from), len(to))
	}
	var out []string
	for v := lo; (lo <= hi && v <= hi) || (lo > hi && v >= hi); {
		s := strconv.Itoa(v)
		if width > 0 && len(s) < width {
			s = strings.Repeat("0", width-len(s)) + s
		}
		out = append(out, s)
		if lo <= hi {
			v += st
		} else {
			v -= st
		}
	}
	return out
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// unescapedIndex is the index of the first c in s outside a character
// class and not escaped, or -1.
func unescapedIndex(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			if j := classEnd(s, i); j > 0 {
				i = j
			}
		case c:
			return i
		}
	}
	return -1
}

// classEnd is the index of the ']' closing the class opened at s[i], or -1.
func classEnd(s string, i int) int {
	j := i + 1
	if j < len(s) && (s[j] == '!' || s[j] == '^') {
		j++
	}
	if j < len(s) && s[j] == ']' {
		return -1
	}
	for ; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case ']':
			return j
		}
	}
	return -1
}

// matchingParen is the index of the unescaped ')' closing the '(' at
// s[open], or -1.
func matchingParen(s string, open int) int {
	depth := 0
	for i := open; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '(':
			depth++
		case ')':
			if depth--; depth == 0 {
				return i
			}
		}
	}
	return -1
}

// parser reads a doublestar pattern (already validated) into tokens.
type parser struct {
	s string
	i int
}

// seq reads tokens up to the end, or (inAlt) up to an unnested ',' or '}'.
func (ps *parser) seq(inAlt bool) ([]token, *globProblem) {
	var out []token
	for ps.i < len(ps.s) {
		c := ps.s[ps.i]
		switch c {
		case ',', '}':
			if inAlt {
				return out, nil
			}
			out = append(out, token{kind: tLit, r: rune(c)})
			ps.i++
		case '\\':
			r, n := utf8.DecodeRuneInString(ps.s[ps.i+1:])
			out = append(out, token{kind: tLit, r: r})
			ps.i += 1 + n
		case '/':
			out = append(out, token{kind: tSlash})
			ps.i++
		case '?':
			out = append(out, token{kind: tAny})
			ps.i++
		case '*':
			out = append(out, token{kind: tStar})
			ps.i++
		case '[':
			t, p := ps.class()
			if p != nil {
				return nil, p
			}
			out = append(out, t)
		case '{':
			open := ps.i
			ps.i++
			var alts [][]token
			for {
				a, p := ps.seq(true)
				if p != nil {
					return nil, p
				}
				alts = append(alts, a)
				if ps.i >= len(ps.s) {
					return nil, problem(ErrInvalidGlob, "malformed", "", "unbalanced {")
				}
				ps.i++
				if ps.s[ps.i-1] == '}' {
					break
				}
			}
			if len(alts) == 1 {
				text := ps.s[open:ps.i]
				return nil, problem(ErrUnsupportedGlob, "brace-without-comma", quote(ps.s[:open]+`\{`+text[1:len(text)-1]+`\}`+ps.s[ps.i:])+" for the braces, or leave them out",
					"%s has no comma: picomatch reads braces without one as literal text, doublestar as a one-way choice", text)
			}
			out = append(out, token{kind: tAlt, alts: alts})
		default:
			r, n := utf8.DecodeRuneInString(ps.s[ps.i:])
			out = append(out, token{kind: tLit, r: r})
			ps.i += n
		}
	}
	if inAlt {
		return nil, problem(ErrInvalidGlob, "malformed", "", "unbalanced {")
	}
	return out, nil
}

// class reads a character class the way doublestar's matcher does: an
// optional '!' or '^', then single characters (a backslash escapes one)
// and lo-hi ranges up to the first unescaped ']'.
func (ps *parser) class() (token, *globProblem) {
	t := token{kind: tClass}
	start := ps.i
	ps.i++ // '['
	if ps.i < len(ps.s) && (ps.s[ps.i] == '!' || ps.s[ps.i] == '^') {
		t.neg = true
		ps.i++
	}
	haveLast := false
	for ps.i < len(ps.s) && ps.s[ps.i] != ']' {
		r, n := utf8.DecodeRuneInString(ps.s[ps.i:])
		ps.i += n
		if haveLast && r == '-' && ps.i < len(ps.s) && ps.s[ps.i] != ']' {
			if ps.s[ps.i] == '\\' {
				ps.i++
			}
			hi, n := utf8.DecodeRuneInString(ps.s[ps.i:])
			ps.i += n
			if lo := t.ranges[len(t.ranges)-1].lo; hi < lo {
				return t, problem(ErrInvalidGlob, "malformed", "", "the class range %q runs backwards; write %q", string(lo)+"-"+string(hi), string(hi)+"-"+string(lo))
			}
			t.ranges[len(t.ranges)-1].hi = hi
			haveLast = false
			continue
		}
		if r == '\\' {
			r, n = utf8.DecodeRuneInString(ps.s[ps.i:])
			ps.i += n
		}
		t.ranges = append(t.ranges, runeRange{r, r})
		haveLast = true
	}
	if ps.i >= len(ps.s) {
		return t, problem(ErrInvalidGlob, "malformed", "", "unbalanced [")
	}
	ps.i++ // ']'
	text := ps.s[start:ps.i]
	if strings.Contains(text, `\`) {
		return t, problem(ErrUnsupportedGlob, "backslash-in-class", "", "%s has a backslash in a character class, which picomatch hands to the regex engine ([\\d] is a digit there, [\\]] no class at all); list the characters without escapes", text)
	}
	if !t.neg && slices.ContainsFunc(t.ranges, func(r runeRange) bool { return r.lo <= '/' && '/' <= r.hi }) {
		return t, problem(ErrUnsupportedGlob, "slash-in-class", "", "%s can match '/': picomatch lets a class match the separator, this matcher never does; write the '/' outside the class", text)
	}
	// picomatch matches a class whose text holds no regex character both
	// as a class and as that text: "[id]" matches "i", "d" and "[id]".
	if !t.neg && !strings.ContainsAny(text[1:len(text)-1], "-*+?.^${}(|)[]") {
		t.dual = text
	}
	return t, nil
}

// expand writes every brace-free alternative of toks, each prefixed with
// head, to out.
func expand(toks, head []token, out *[][]token) *globProblem {
	for i, t := range toks {
		alts := t.alts
		switch {
		case t.kind == tClass && t.dual != "":
			class := t
			class.dual = ""
			var lit []token
			for _, r := range t.dual {
				lit = append(lit, token{kind: tLit, r: r})
			}
			alts = [][]token{{class}, lit}
		case t.kind != tAlt:
			continue
		}
		h := append(slices.Clone(head), toks[:i]...)
		for _, a := range alts {
			// The alternative may hold braces of its own: expand it with
			// the rest of the glob.
			rest := append(slices.Clone(a), toks[i+1:]...)
			if err := expand(rest, slices.Clip(h), out); err != nil {
				return err
			}
		}
		return nil
	}
	if len(*out) >= maxExpansions {
		return problem(ErrUnsupportedGlob, "too-many-alternatives", "", "the braces expand to more than %d alternatives; split the glob", maxExpansions)
	}
	*out = append(*out, append(slices.Clone(head), toks...))
	return nil
}

// normalize merges star runs and marks each whole-segment "**" as a
// globstar, as doublestar reads them: "**" is a globstar only between
// separators (or the ends), and any other run of stars is one "*".
func normalize(e []token) []token {
	var out []token
	for i := 0; i < len(e); i++ {
		if e[i].kind != tStar {
			out = append(out, e[i])
			continue
		}
		j := i
		for j < len(e) && e[j].kind == tStar {
			j++
		}
		atStart := i == 0 || e[i-1].kind == tSlash
		atEnd := j == len(e) || e[j].kind == tSlash
		if j-i == 2 && atStart && atEnd {
			out = append(out, token{kind: tGlobstar})
		} else {
			out = append(out, token{kind: tStar})
		}
		i = j - 1
	}
	return out
}

// checkSegments refuses an expansion that cannot match a clean path, or
// that names a directory rather than files.
func checkSegments(raw string, e []token) *globProblem {
	if e[0].kind == tSlash {
		return problem(ErrInvalidGlob, "absolute", "", "a brace alternative makes the glob absolute: patterns match repository-relative paths")
	}
	if e[len(e)-1].kind == tSlash {
		// "d/" means the paths under d: "d/**", or "d/**/*" where d ends
		// in a '*' (see star-before-globstar); "d/**/" is "d/**" already.
		dir := strings.TrimRight(raw, "/")
		rewrite := dir + "/**"
		switch {
		case dir == "**" || strings.HasSuffix(dir, "/**"):
			rewrite = dir
		case strings.HasSuffix(dir, "*"):
			rewrite = dir + "/**/*"
		}
		return problem(ErrUnsupportedGlob, "trailing-slash", quote(rewrite), "a trailing '/' names a directory, and a diff lists files")
	}
	for i := 0; i+2 < len(e); i++ {
		if e[i].kind == tGlobstar && e[i+1].kind == tSlash && e[i+2].kind == tGlobstar {
			rewrite := raw
			for strings.Contains(rewrite, "**/**") {
				rewrite = strings.ReplaceAll(rewrite, "**/**", "**")
			}
			return problem(ErrUnsupportedGlob, "repeated-globstar", quote(rewrite), "'**/**' repeats the globstar, and picomatch and doublestar read it differently (picomatch's \"a/**/**\" matches \"a\"); write one '**'")
		}
	}
	if n := len(e); n >= 3 && e[n-1].kind == tGlobstar && e[n-2].kind == tSlash && e[n-3].kind == tStar {
		rewrite := ""
		if strings.HasSuffix(raw, "*/**") {
			rewrite = quote(raw+"/*") + " for the paths under such a directory"
		}
		return problem(ErrUnsupportedGlob, "star-before-globstar", rewrite, "a '*' right before a trailing '/**' is read differently by picomatch (\"a*/**\" matches only paths under a directory a*) and doublestar (which matches the file \"ab\" too)")
	}
	seg := 0
	for i := 0; i <= len(e); i++ {
		if i < len(e) && e[i].kind != tSlash {
			continue
		}
		s := e[seg:i]
		switch {
		case len(s) == 0:
			return problem(ErrNeverMatches, "empty-segment", quote(strings.ReplaceAll(raw, "//", "/")), "an empty path segment ('//') never matches a path git lists")
		case len(s) <= 2 && allDots(s):
			return problem(ErrNeverMatches, "dot-segment", "", "a %q segment never matches a path git lists", strings.Repeat(".", len(s)))
		}
		seg = i + 1
	}
	return nil
}

func allDots(s []token) bool {
	for _, t := range s {
		if t.kind != tLit || t.r != '.' {
			return false
		}
	}
	return true
}

// classRanges is a class's set of runes as sorted, disjoint ranges that
// never include '/': a class, negated or not, never matches the separator.
func classRanges(t token) []runeRange {
	var rs []runeRange
	for _, r := range t.ranges {
		if r.lo <= r.hi {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b runeRange) int { return int(a.lo - b.lo) })
	var merged []runeRange
	for _, r := range rs {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi+1 {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	if t.neg {
		var inv []runeRange
		next := rune(0)
		for _, r := range merged {
			if r.lo > next {
				inv = append(inv, runeRange{next, r.lo - 1})
			}
			next = r.hi + 1
		}
		if next <= utf8.MaxRune {
			inv = append(inv, runeRange{next, utf8.MaxRune})
		}
		merged = inv
	}
	var out []runeRange
	for _, r := range merged {
		if r.lo <= '/' && '/' <= r.hi {
			if r.lo < '/' {
				out = append(out, runeRange{r.lo, '/' - 1})
			}
			if r.hi > '/' {
				out = append(out, runeRange{'/' + 1, r.hi})
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// render writes a normalized expansion as a doublestar pattern that means
// exactly it: literals escaped, classes as positive ranges without '/'.
func render(e []token) string {
	var b strings.Builder
	for _, t := range e {
		switch t.kind {
		case tLit:
			if strings.ContainsRune(`*?[]{}\,!`, t.r) {
				b.WriteByte('\\')
			}
			b.WriteRune(t.r)
		case tSlash:
			b.WriteByte('/')
		case tAny:
			b.WriteByte('?')
		case tStar:
			b.WriteByte('*')
		case tGlobstar:
			b.WriteString("**")
		case tClass:
			rs := classRanges(t)
			if len(rs) == 0 {
				// No rune: a class doublestar can never match.
				b.WriteString(`[\x-\a]`)
				continue
			}
			b.WriteByte('[')
			for _, r := range rs {
				b.WriteByte('\\')
				b.WriteRune(r.lo)
				if r.hi != r.lo {
					b.WriteString(`-\`)
					b.WriteRune(r.hi)
				}
			}
			b.WriteByte(']')
		}
	}
	return b.String()
}

// regex writes a normalized expansion as an RE2 expression over whole
// paths (no anchors, '.' matching any rune), for the static checks.
func regex(e []token) string {
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		t := e[i]
		switch t.kind {
		case tLit:
			b.WriteString(regexp.QuoteMeta(string(t.r)))
		case tSlash:
			if i+2 == len(e) && e[i+1].kind == tGlobstar {
				b.WriteString(`(?:/.*)?`) // "x/**" matches x itself
				return b.String()
			}
			b.WriteByte('/')
		case tAny:
			b.WriteString(`[^/]`)
		case tStar:
			b.WriteString(`[^/]*`)
		case tGlobstar:
			if i+1 < len(e) { // "**/": zero or more directories
				b.WriteString(`(?:.*/)?`)
				i++
				continue
			}
			b.WriteString(`.*`)
		case tClass:
			rs := classRanges(t)
			if len(rs) == 0 {
				b.WriteString(`[^\x00-\x{10FFFF}]`)
				continue
			}
			b.WriteByte('[')
			for _, r := range rs {
				fmt.Fprintf(&b, `\x{%x}`, r.lo)
				if r.hi != r.lo {
					fmt.Fprintf(&b, `-\x{%x}`, r.hi)
				}
			}
			b.WriteByte(']')
		}
	}
	return b.String()
}

// literal returns the expansion's text when it has no wildcard.
func literal(e []token) (string, bool) {
	var b strings.Builder
	for _, t := range e {
		switch t.kind {
		case tLit:
			b.WriteRune(t.r)
		case tSlash:
			b.WriteByte('/')
		default:
			return "", false
		}
	}
	return b.String(), true
}

// literalParts returns what every path an expansion matches starts and
// ends with, and the literal directory it lies in ("" for none): the
// literal text before the first wildcard (without a final '/', which a
// trailing "/**" may leave out), the literal text after the last wildcard
// or '/', and the literal text before the last '/' ahead of the first
// wildcard. Escapes are resolved, as the matcher resolves them.
func literalParts(e []token) (prefix, suffix, dir string) {
	first := slices.IndexFunc(e, func(t token) bool { return t.kind != tLit && t.kind != tSlash })
	if first < 0 {
		first = len(e)
	}
	var head strings.Builder
	lastSlash := -1
	for _, t := range e[:first] {
		if t.kind == tSlash {
			lastSlash = head.Len()
			head.WriteByte('/')
			continue
		}
		head.WriteRune(t.r)
	}
	h := head.String()
	if lastSlash >= 0 {
		dir = h[:lastSlash]
	}
	prefix = strings.TrimSuffix(h, "/")
	var tail []rune
	for i := len(e) - 1; i > first && e[i].kind == tLit; i-- {
		tail = append(tail, e[i].r)
	}
	slices.Reverse(tail)
	return prefix, string(tail), dir
}
