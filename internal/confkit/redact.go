package confkit

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// StrongSecretLen is the length from which a secret's value is taken out
// of a log line wherever it appears. A shorter one is taken out only where
// it stands alone, a whole token: Lark's test verification token "v",
// replaced inside words, turned "does not serve GET /open-apis/im/v1"
// into "does not ser[redacted]e GET /open-apis/im/[redacted]1". Such a
// secret is weak anyway; doctor says so.
const StrongSecretLen = 8

// Redacted is what a secret's value becomes in a log line or an error.
const Redacted = "[redacted]"

// Redact returns s with the values of secrets taken out: each of
// StrongSecretLen bytes or more wherever it appears, a shorter one only
// as a whole token (not between letters, digits or underscores). Empty
// values are skipped.
func Redact(s string, secrets ...string) string {
	for _, x := range secrets {
		switch {
		case x == "":
		case len(x) >= StrongSecretLen:
			s = strings.ReplaceAll(s, x, Redacted)
		default:
			s = redactToken(s, x)
		}
	}
	return s
}

// redactToken replaces x in s where it is a whole token.
func redactToken(s, x string) string {
	var b strings.Builder
	i := 0
	for {
		j := strings.Index(s[i:], x)
		if j < 0 {
			break
		}
		j += i
		end := j + len(x)
		if wordBefore(s, j) || wordAfter(s, end) {
			// Inside a word: step one character on, not past x, so a
			// whole-token match that overlaps this one is still found.
			_, n := utf8.DecodeRuneInString(s[j:])
			b.WriteString(s[i : j+n])
			i = j + n
			continue
		}
		b.WriteString(s[i:j])
		b.WriteString(Redacted)
		i = end
	}
	if i == 0 {
		return s
	}
	b.WriteString(s[i:])
	return b.String()
}

func wordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

func wordBefore(s string, i int) bool {
	r, n := utf8.DecodeLastRuneInString(s[:i])
	return n > 0 && wordRune(r)
}

func wordAfter(s string, i int) bool {
	r, n := utf8.DecodeRuneInString(s[i:])
	return n > 0 && wordRune(r)
}
