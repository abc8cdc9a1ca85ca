package mime

import (
	"sort"
	"strconv"
	"strings"
)

// mediaType is a parsed Content-Type or Content-Disposition: the value
// before the first ';' (lowercased) and its parameters (names lowercased).
// Values of RFC 2231 extended parameters are kept as bytes with their
// charset, to be decoded with the rest of the header text.
type mediaType struct {
	value  string
	params []namedParam // in the order their names first appear
}

// namedParam is a parameter and its name.
type namedParam struct {
	name string
	param
}

// param is one parameter value. Extended (RFC 2231) values carry their
// charset; others are the raw text, which may hold encoded words or 8-bit
// bytes.
type param struct {
	raw      []byte
	charset  string
	extended bool
}

// lookup returns the parameter name, and whether there is one.
func (m mediaType) lookup(name string) (param, bool) {
	for _, p := range m.params {
		if p.name == name {
			return p.param, true
		}
	}
	return param{}, false
}

func (m mediaType) get(name string) string {
	p, _ := m.lookup(name)
	return string(p.raw)
}

// parseMediaType parses a header value of the form
// "type/subtype; name=value; name*=charset'lang'%XX; name*0=...; ..."
// leniently: a parameter that does not parse is skipped, the first of
// duplicates wins, unquoted values may hold anything but ';', quoted values
// may miss their closing quote, and continuations (name*0, name*1*, ...)
// are joined in order whatever order they come in.
func parseMediaType(v []byte) mediaType {
	s := string(v)
	m := mediaType{}
	semi := strings.IndexByte(s, ';')
	if semi < 0 {
		semi = len(s)
	}
	m.value = strings.ToLower(strings.Trim(s[:semi], " \t\"'"))
	if i := strings.IndexAny(m.value, " \t("); i >= 0 {
		m.value = m.value[:i]
	}
	pieces := scanParams(s[semi:])
	if len(pieces) == 0 {
		return m
	}
	m.params = make([]namedParam, 0, len(pieces))
	for i, p := range pieces {
		if seen(pieces[:i], p.name) {
			continue
		}
		// The pieces of this name, in order: most names have one.
		same := pieces[i : i+1]
		for _, q := range pieces[i+1:] {
			if q.name == p.name {
				if len(same) == 1 {
					same = append([]paramPiece{p}, q)
				} else {
					same = append(same, q)
				}
			}
		}
		m.params = append(m.params, namedParam{name: p.name, param: joinParam(same)})
	}
	return m
}

// seen reports whether one of pieces is named name.
func seen(pieces []paramPiece, name string) bool {
	for _, p := range pieces {
		if p.name == name {
			return true
		}
	}
	return false
}

// paramPiece is one "name=value" of a parameter, which RFC 2231 may
// continue over several (name*0, name*1, ...) and extend with a charset
// and percent escapes (name*, name*0*).
type paramPiece struct {
	name     string // lowercased, without the RFC 2231 suffix
	index    int    // the continuation number; -1 for none
	value    []byte
	extended bool
}

// scanParams splits the parameters that follow a media type's value
// ("; name=value; ...") into pieces, in order, each named (lowercased). A
// parameter that does not parse is skipped; unquoted values may hold
// anything but ';', quoted values may miss their closing quote.
func scanParams(rest string) []paramPiece {
	var pieces []paramPiece
	for len(rest) > 0 {
		rest = strings.TrimLeft(rest, "; \t")
		if rest == "" {
			break
		}
		eq := strings.IndexAny(rest, "=;")
		if eq < 0 || rest[eq] == ';' {
			if eq < 0 {
				break
			}
			rest = rest[eq:]
			continue
		}
		name := strings.ToLower(strings.Trim(rest[:eq], " \t\"'"))
		rest = strings.TrimLeft(rest[eq+1:], " \t")
		var value string
		if strings.HasPrefix(rest, `"`) {
			value, rest = unquote(rest)
		} else {
			end := strings.IndexByte(rest, ';')
			if end < 0 {
				end = len(rest)
			}
			value, rest = strings.TrimRight(rest[:end], " \t"), rest[end:]
		}
		if name == "" {
			continue
		}
		name, p, ok := paramName(name)
		if !ok {
			continue
		}
		p.name, p.value = name, []byte(value)
		if pieces == nil {
			pieces = make([]paramPiece, 0, 4)
		}
		pieces = append(pieces, p)
	}
	return pieces
}

// paramName splits an RFC 2231 parameter name: "name", "name*" (extended),
// "name*0" (continued), "name*0*" (both). ok is false when the
// continuation number is not one from 0 to 1000.
func paramName(name string) (base string, p paramPiece, ok bool) {
	p = paramPiece{index: -1}
	star := strings.IndexByte(name, '*')
	if star < 0 {
		return name, p, true
	}
	suffix := name[star+1:]
	p.extended = strings.HasSuffix(suffix, "*") || suffix == ""
	if num := strings.TrimSuffix(suffix, "*"); num != "" {
		k, err := strconv.Atoi(num)
		if err != nil || k < 0 || k > 1000 {
			return "", p, false
		}
		p.index = k
	}
	return name[:star], p, true
}

// joinParam makes one parameter of its pieces. An extended or continued
// form wins over a plain one (RFC 2231 §4: senders add the plain one for
// old readers); of plain ones, the first wins.
func joinParam(ps []paramPiece) param {
	var plain *paramPiece
	var parts []paramPiece
	for i := range ps {
		switch {
		case ps[i].index < 0 && !ps[i].extended:
			if plain == nil {
				plain = &ps[i]
			}
		case ps[i].index < 0:
			parts = append(parts[:0], paramPiece{index: 0, value: ps[i].value, extended: true})
		default:
			parts = append(parts, ps[i])
		}
	}
	if len(parts) == 0 {
		return param{raw: plain.value}
	}
	return joinContinuations(parts)
}

// joinContinuations joins the pieces of a continued or extended parameter
// in the order of their numbers, whatever order they came in (the first of
// duplicates wins). Extended pieces are percent-decoded; the first names
// the value's charset ("charset'language'value").
func joinContinuations(parts []paramPiece) param {
	sort.SliceStable(parts, func(i, j int) bool { return parts[i].index < parts[j].index })
	var (
		out     []byte
		charset string
		ext     bool
		seen    = map[int]bool{}
	)
	for i, p := range parts {
		if seen[p.index] {
			continue
		}
		seen[p.index] = true
		v := p.value
		if p.extended {
			ext = true
			if i == 0 {
				// charset'language'value
				if a := strings.IndexByte(string(v), '\''); a >= 0 {
					if b := strings.IndexByte(string(v[a+1:]), '\''); b >= 0 {
						charset = charsetLabel(string(v[:a]))
						v = v[a+1+b+1:]
					}
				}
			}
			v = percentDecode(v)
		}
		out = append(out, v...)
	}
	if !ext {
		return param{raw: out}
	}
	return param{raw: out, charset: charset, extended: true}
}

// unquote reads a quoted string at the start of s and returns its content
// (backslash escapes resolved) and what follows. A missing closing quote
// ends the value at the next ';' (or the end).
func unquote(s string) (string, string) {
	if end := strings.IndexAny(s[1:], `"\\`); end >= 0 && s[1+end] == '"' {
		return s[1 : 1+end], s[1+end+1:] // no escape: the text as it stands
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case '"':
			return b.String(), s[i+1:]
		default:
			b.WriteByte(c)
		}
	}
	// Unclosed: take up to the first ';'.
	v := s[1:]
	if i := strings.IndexByte(v, ';'); i >= 0 {
		return strings.TrimRight(v[:i], " \t"), v[i:]
	}
	return strings.TrimRight(v, " \t"), ""
}

// percentDecode resolves %XX escapes; a '%' that starts none is kept.
func percentDecode(v []byte) []byte {
	if !strings.Contains(string(v), "%") {
		return v
	}
	out := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			h, ok1 := unhex(v[i+1])
			l, ok2 := unhex(v[i+2])
			if ok1 && ok2 {
				out = append(out, h<<4|l)
				i += 2
				continue
			}
		}
		out = append(out, v[i])
	}
	return out
}

// param decodes a parameter value to UTF-8: an extended value in its
// charset, a plain one as header text (encoded words, which many mailers
// put in quoted file names, and raw 8-bit bytes).
func (d *Decoder) param(p param, what string) string {
	if p.extended {
		s := decodeCharset(p.raw, p.charset, d.hint, what, d.notes)
		if strings.Contains(s, "=?") {
			s = d.words(s, what)
		}
		return OneLine(s)
	}
	return d.Text(p.raw, what)
}
