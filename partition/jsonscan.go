package partition

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonReader reads JSON a token at a time, from a stream or from one
// slice, for the two inventory listings: nextest's, a single document of
// hundreds of megabytes, is read without holding it (encoding/json's
// Decoder reads a whole value into memory before decoding it), and go test
// -json's events are read a line at a time without reflection. It accepts
// exactly what encoding/json accepts, skipping what a listing does not use
// but checking its syntax, with encoding/json's nesting limit, and decodes
// strings as encoding/json does (invalid UTF-8 and unpaired surrogates
// become U+FFFD).
type jsonReader struct {
	r     io.Reader // nil: buf is all the input
	buf   []byte    // buf[pos:] is unread
	pos   int
	rerr  error // what ended r (io.EOF at its end)
	base  int64 // the input offset of buf[0]
	depth int
	// str holds decoded strings that differ from their JSON text. In
	// streaming mode (r != nil) it is reset at each object key; reading
	// one slice, only by reset, so that a line's strings all stay valid.
	str []byte
	key []byte // the current object key, copied out of buf
}

// jsonMaxDepth is encoding/json's nesting limit.
const jsonMaxDepth = 10000

var errJSONEnd = errors.New("unexpected end of JSON input")

func newJSONReader(r io.Reader) *jsonReader {
	return &jsonReader{r: r, buf: make([]byte, 0, 64<<10)}
}

// reset makes d read b, all of it, from the start.
func (d *jsonReader) reset(b []byte) {
	d.r, d.buf, d.pos, d.rerr, d.base, d.depth, d.str = nil, b, 0, io.EOF, 0, 0, d.str[:0]
}

// more reads more input into buf, keeping buf[pos:] (which it moves to the
// front), and reports whether it read any.
func (d *jsonReader) more() bool {
	if d.rerr != nil {
		return false
	}
	if d.pos > 0 {
		n := copy(d.buf[:cap(d.buf)], d.buf[d.pos:])
		d.base += int64(d.pos)
		d.buf, d.pos = d.buf[:n], 0
	}
	if len(d.buf) == cap(d.buf) {
		d.buf = slices.Grow(d.buf, max(cap(d.buf), 4<<10))
	}
	for tries := 0; tries < 100; tries++ {
		n, err := d.r.Read(d.buf[len(d.buf):cap(d.buf)])
		d.buf = d.buf[:len(d.buf)+n]
		if err != nil {
			d.rerr = err
			return n > 0
		}
		if n > 0 {
			return true
		}
	}
	d.rerr = io.ErrNoProgress
	return false
}

// endErr is the error for input that ended inside a value.
func (d *jsonReader) endErr() error {
	if d.rerr != nil && d.rerr != io.EOF {
		return d.rerr
	}
	return errJSONEnd
}

// syntaxErr is the error for the byte k bytes past pos, in encoding/json's
// words.
func (d *jsonReader) syntaxErr(k int, what string) error {
	var q string
	switch c := d.buf[d.pos+k]; c {
	case '\'':
		q = `'\''`
	case '"':
		q = `'"'`
	default:
		s := strconv.Quote(string(rune(c)))
		q = "'" + s[1:len(s)-1] + "'"
	}
	return fmt.Errorf("invalid character %s %s (offset %d)", q, what, d.base+int64(d.pos+k))
}

// peek skips whitespace and returns the next byte, unread.
func (d *jsonReader) peek() (byte, error) {
	for {
		for ; d.pos < len(d.buf); d.pos++ {
			switch c := d.buf[d.pos]; c {
			case ' ', '\t', '\n', '\r':
			default:
				return c, nil
			}
		}
		if !d.more() {
			return 0, d.endErr()
		}
	}
}

// at returns the byte k bytes past pos, reading more when needed.
func (d *jsonReader) at(k int) (byte, bool) {
	for d.pos+k >= len(d.buf) {
		if !d.more() {
			return 0, false
		}
	}
	return d.buf[d.pos+k], true
}

// expect reads the next non-space byte, which must be c.
func (d *jsonReader) expect(c byte, what string) error {
	got, err := d.peek()
	if err != nil {
		return err
	}
	if got != c {
		return d.syntaxErr(0, what)
	}
	d.pos++
	return nil
}

// push enters an object or array (its opening byte next, unread).
func (d *jsonReader) push() error {
	if d.depth++; d.depth > jsonMaxDepth {
		return d.syntaxErr(0, "exceeded max depth")
	}
	d.pos++
	return nil
}

// objectOrNull reads an object (object) or a null, after onNull (when
// set), as encoding/json decodes null into a map or struct; anything else
// is a type error naming what.
func (d *jsonReader) objectOrNull(what string, onNull func(), field func(key []byte) error) error {
	c, err := d.peek()
	if err != nil {
		return err
	}
	switch c {
	case 'n':
		if onNull != nil {
			onNull()
		}
		return d.literal("null")
	case '{':
		return d.object(field)
	}
	return d.typeErr(c, "object", what)
}

// object reads an object, its '{' next. For each key it calls field,
// which must read the key's value; the key it is given is valid only
// until field reads that value.
func (d *jsonReader) object(field func(key []byte) error) error {
	if err := d.push(); err != nil {
		return err
	}
	c, err := d.peek()
	if err != nil {
		return err
	}
	if c == '}' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		if c != '"' {
			return d.syntaxErr(0, "looking for beginning of object key string")
		}
		if d.r != nil {
			d.str = d.str[:0]
		}
		key, err := d.readString()
		if err != nil {
			return err
		}
		d.key = append(d.key[:0], key...)
		if err := d.expect(':', "after object key"); err != nil {
			return err
		}
		if err := field(d.key); err != nil {
			return err
		}
		if c, err = d.peek(); err != nil {
			return err
		}
		switch c {
		case ',':
			d.pos++
			if c, err = d.peek(); err != nil {
				return err
			}
		case '}':
			d.pos++
			d.depth--
			return nil
		default:
			return d.syntaxErr(0, "after object key:value pair")
		}
	}
}

// kindOf is the kind of the value that starts with c, in encoding/json's
// words.
func kindOf(c byte) string {
	switch c {
	case '{':
		return "object"
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// typeErr is the error for a value of the wrong kind (after checking that
// it is a value at all).
func (d *jsonReader) typeErr(c byte, want, field string) error {
	if err := d.skipValue(); err != nil {
		return err
	}
	return fmt.Errorf("cannot unmarshal %s into %s, a %s", kindOf(c), field, want)
}

// stringOrNull reads a string or null: ok is false for null, which leaves
// a string field as it was (encoding/json). The bytes are valid until the
// next read (streaming) or reset (one slice).
func (d *jsonReader) stringOrNull(field string) (s []byte, ok bool, err error) {
	c, err := d.peek()
	if err != nil {
		return nil, false, err
	}
	switch c {
	case '"':
		s, err := d.readString()
		return s, err == nil, err
	case 'n':
		return nil, false, d.literal("null")
	}
	return nil, false, d.typeErr(c, "string", field)
}

// literal reads true, false or null, its first byte next.
func (d *jsonReader) literal(word string) error {
	for k := 0; k < len(word); k++ {
		c, ok := d.at(k)
		if !ok {
			return d.endErr()
		}
		if c != word[k] {
			return d.syntaxErr(k, "in literal "+word+" (expecting "+fmt.Sprintf("%q", word[k])+")")
		}
	}
	d.pos += len(word)
	return nil
}

// number reads a number, its first byte next.
func (d *jsonReader) number() error {
	k := 0
	digits := func() int {
		n := 0
		for {
			c, ok := d.at(k)
			if !ok || c < '0' || c > '9' {
				return n
			}
			k++
			n++
		}
	}
	bad := func(what string) error {
		if _, ok := d.at(k); !ok {
			return d.endErr()
		}
		return d.syntaxErr(k, what)
	}
	if c, _ := d.at(k); c == '-' {
		k++
	}
	switch c, _ := d.at(k); {
	case c == '0':
		k++
	case c >= '1' && c <= '9':
		digits()
	default:
		return bad("in numeric literal")
	}
	if c, _ := d.at(k); c == '.' {
		k++
		if digits() == 0 {
			return bad("after decimal point in numeric literal")
		}
	}
	if c, _ := d.at(k); c == 'e' || c == 'E' {
		k++
		if c, _ := d.at(k); c == '+' || c == '-' {
			k++
		}
		if digits() == 0 {
			return bad("in exponent of numeric literal")
		}
	}
	d.pos += k
	return nil
}

// skipValue reads any value, checking its syntax.
func (d *jsonReader) skipValue() error {
	top := d.depth
	var open []byte // the containers entered, innermost last
	for {
		c, err := d.peek()
		if err != nil {
			return err
		}
		switch {
		case c == '{' || c == '[':
			if err := d.push(); err != nil {
				return err
			}
			open = append(open, c)
			if c, err = d.peek(); err != nil {
				return err
			}
			if c == '}' && open[len(open)-1] == '{' || c == ']' && open[len(open)-1] == '[' {
				d.pos++
				d.depth--
				open = open[:len(open)-1]
				break
			}
			if open[len(open)-1] == '{' {
				if err := d.skipKey(c); err != nil {
					return err
				}
			}
			continue
		case c == '"':
			err = d.skipString()
		case c == 't':
			err = d.literal("true")
		case c == 'f':
			err = d.literal("false")
		case c == 'n':
			err = d.literal("null")
		case c == '-' || c >= '0' && c <= '9':
			err = d.number()
		default:
			return d.syntaxErr(0, "looking for beginning of value")
		}
		if err != nil {
			return err
		}
		// After a value: close containers, or go on to the next element.
		for {
			if d.depth == top {
				return nil
			}
			c, err := d.peek()
			if err != nil {
				return err
			}
			in := open[len(open)-1]
			if c == ',' {
				d.pos++
				if in == '{' {
					c, err := d.peek()
					if err != nil {
						return err
					}
					if err := d.skipKey(c); err != nil {
						return err
					}
				}
				break
			}
			if c == '}' && in == '{' || c == ']' && in == '[' {
				d.pos++
				d.depth--
				open = open[:len(open)-1]
				continue
			}
			if in == '{' {
				return d.syntaxErr(0, "after object key:value pair")
			}
			return d.syntaxErr(0, "after array element")
		}
	}
}

// skipKey reads an object key and its colon, c (the key's first byte) next.
func (d *jsonReader) skipKey(c byte) error {
	if c != '"' {
		return d.syntaxErr(0, "looking for beginning of object key string")
	}
	if err := d.skipString(); err != nil {
		return err
	}
	return d.expect(':', "after object key")
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// skipString reads a string, its '"' next, checking it and discarding it.
func (d *jsonReader) skipString() error {
	d.pos++
	for {
		for d.pos < len(d.buf) {
			switch c := d.buf[d.pos]; {
			case c == '"':
				d.pos++
				return nil
			case c == '\\':
				if err := d.escape(); err != nil {
					return err
				}
			case c < ' ':
				return d.syntaxErr(0, "in string literal")
			default:
				d.pos++
			}
		}
		if !d.more() {
			return d.endErr()
		}
	}
}

// escape checks the escape sequence at pos and steps over it.
func (d *jsonReader) escape() error {
	c, ok := d.at(1)
	if !ok {
		return d.endErr()
	}
	switch c {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		d.pos += 2
		return nil
	case 'u':
		for k := 2; k < 6; k++ {
			h, ok := d.at(k)
			if !ok {
				return d.endErr()
			}
			if !isHex(h) {
				return d.syntaxErr(k, "in \\u hexadecimal character escape")
			}
		}
		d.pos += 6
		return nil
	}
	return d.syntaxErr(1, "in string escape code")
}

// hex4 is the value of the \uXXXX escape k bytes past pos, or -1 when
// there is none.
func (d *jsonReader) hex4(k int) rune {
	if _, ok := d.at(k + 5); !ok {
		return -1
	}
	b := d.buf[d.pos+k:]
	if b[0] != '\\' || b[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// readString reads a string, its '"' next, and returns its value: a view
// of buf when it needs no decoding, else decoded into str.
func (d *jsonReader) readString() ([]byte, error) {
	// Scan for the end while the text is its own value.
	k := 1
	for {
		if d.pos+k >= len(d.buf) {
			if !d.more() {
				return nil, d.endErr()
			}
			continue
		}
		c := d.buf[d.pos+k]
		if c == '"' {
			s := d.buf[d.pos+1 : d.pos+k]
			d.pos += k + 1
			return s, nil
		}
		if c == '\\' || c < ' ' {
			break
		}
		if c >= utf8.RuneSelf {
			if d.pos+k+utf8.UTFMax > len(d.buf) && d.more() {
				continue
			}
			r, size := utf8.DecodeRune(d.buf[d.pos+k:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			k += size
			continue
		}
		k++
	}
	// Decode the rest into str, as encoding/json's unquote does.
	start := len(d.str)
	d.str = append(d.str, d.buf[d.pos+1:d.pos+k]...)
	d.pos += k
	for {
		if d.pos >= len(d.buf) && !d.more() {
			return nil, d.endErr()
		}
		switch c := d.buf[d.pos]; {
		case c == '"':
			d.pos++
			return d.str[start:], nil
		case c == '\\':
			e, _ := d.at(1)
			if e == 'u' {
				r := d.hex4(0)
				if r < 0 {
					return nil, d.escape()
				}
				d.pos += 6
				if utf16.IsSurrogate(r) {
					if dec := utf16.DecodeRune(r, d.hex4(0)); dec != unicode.ReplacementChar {
						r = dec
						d.pos += 6
					} else {
						r = unicode.ReplacementChar
					}
				}
				d.str = utf8.AppendRune(d.str, r)
				continue
			}
			if err := d.escape(); err != nil {
				return nil, err
			}
			switch e {
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			}
			d.str = append(d.str, e)
		case c < ' ':
			return nil, d.syntaxErr(0, "in string literal")
		case c < utf8.RuneSelf:
			d.str = append(d.str, c)
			d.pos++
		default:
			for d.pos+utf8.UTFMax > len(d.buf) && d.more() {
			}
			r, size := utf8.DecodeRune(d.buf[d.pos:])
			d.str = utf8.AppendRune(d.str, r)
			d.pos += size
		}
	}
}

// fieldIs reports whether an object key names a field, as encoding/json
// matches keys to a struct's fields: exactly, or else case-insensitively
// (bytes.EqualFold, Unicode's simple folding).
func fieldIs(key []byte, name string) bool {
	return string(key) == name || strings.EqualFold(string(key), name)
}
