package mime

import (
	"net/mail"
	"regexp"
	"strings"
	"time"
)

// zones maps the zone names found in Date headers to offsets: RFC 5322's
// obsolete North American zones (which net/mail reads as UTC), and the
// common non-standard ones. Military single letters and unknown names are
// taken as UTC, as RFC 5322 §4.3 advises.
var zones = map[string]string{
	"UT": "+0000", "UTC": "+0000", "GMT": "+0000", "Z": "+0000",
	"EST": "-0500", "EDT": "-0400", "CST": "-0600", "CDT": "-0500",
	"MST": "-0700", "MDT": "-0600", "PST": "-0800", "PDT": "-0700",
	"WET": "+0000", "WEST": "+0100", "BST": "+0100", "CET": "+0100", "MET": "+0100",
	"CEST": "+0200", "MEST": "+0200", "EET": "+0200", "EEST": "+0300", "MSK": "+0300",
	"IST": "+0530", "HKT": "+0800", "SGT": "+0800", "AWST": "+0800", "JST": "+0900",
	"KST": "+0900", "ACST": "+0930", "AEST": "+1000", "AEDT": "+1100", "NZST": "+1200",
	"NZDT": "+1300", "HST": "-1000", "AKST": "-0900", "AKDT": "-0800",
}

var (
	dateComment  = regexp.MustCompile(`\([^()]*\)`)
	dateWeekday  = regexp.MustCompile(`(?i)^(mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s*`)
	dateColonTZ  = regexp.MustCompile(`([+-]\d\d):(\d\d)$`)
	dateZoneWord = regexp.MustCompile(`\s([A-Za-z]{1,5})$`)
	dateNumZone  = regexp.MustCompile(`\s[+-]\d{4}\s+[A-Za-z]{1,5}$`)
)

// dateLayouts are tried, in order, on a cleaned Date value that net/mail
// did not parse. Times without a zone are taken as UTC.
var dateLayouts = []string{
	"2 Jan 2006 15:04:05 -0700",
	"2 Jan 2006 15:04 -0700",
	"2 January 2006 15:04:05 -0700",
	"Jan 2 2006 15:04:05 -0700",
	"Jan 2 15:04:05 2006 -0700",
	"Jan 2 15:04:05 -0700 2006",
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05-0700",
	"2006-01-02 15:04:05 -0700",
	"2006-01-02 15:04:05Z07:00",
	"2-Jan-2006 15:04:05 -0700",
	"2/1/2006 15:04:05 -0700",
	"2.1.2006 15:04:05 -0700",
	"2 Jan 2006 15:04:05",
	"2 Jan 2006 15:04",
	"Jan 2 15:04:05 2006",
	"2006-01-02T15:04:05",
	"2006-01-02 15:04:05",
	"2006-01-02",
	"2 Jan 2006",
}

// ParseDate parses a Date header value, leniently: net/mail first, then the
// broken forms seen in the wild (no weekday or a misspelt one, "+00:00"
// offsets, a zone name after the offset or instead of it, ctime format, ISO
// 8601, missing seconds, no zone). It returns the zero time when nothing
// fits, or when the year is not plausible for an email (before 1970 or
// past 9999).
func ParseDate(s string) (time.Time, bool) {
	s = strings.TrimSpace(s)
	if t, ok := parseDateFast(s); ok {
		return plausible(t)
	}
	return parseDate(s)
}

// Layouts of the usual RFC 5322 date, without and with a weekday: the first
// layouts net/mail tries for a date that starts with a digit and for one
// that does not (its layouts without a weekday all start with the day).
const (
	layoutNoWeekday = "2 Jan 2006 15:04:05 -0700"
	layoutWeekday   = "Mon, " + layoutNoWeekday
)

// parseDateFast parses the usual date, "Fri, 6 Feb 2026 19:30:00 +0100"
// with or without the weekday, perhaps followed by a comment of letters
// ("(CET)"), with the one layout net/mail would find first, and so to the
// same time: ParseDate tried net/mail's layouts in turn, and each that
// failed built an error. ok is false for anything else, which the full
// parser reads as before.
func parseDateFast(s string) (t time.Time, ok bool) {
	if end := strings.IndexByte(s, '('); end >= 0 {
		c := s[end+1:]
		if !strings.HasSuffix(c, ")") || strings.TrimLeft(c[:len(c)-1], "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 ") != "" {
			return time.Time{}, false
		}
		s = strings.TrimRight(s[:end], " ")
	}
	z := len(s) - 5
	if z < 1 || s[z-1] != ' ' || strings.IndexAny(s, "+-\r\n\t") != z {
		return time.Time{}, false
	}
	layout := layoutWeekday
	if c := s[0]; c >= '0' && c <= '9' {
		layout = layoutNoWeekday
	}
	if len(s) < len(layout)-2 || len(s) > len(layout)+16 {
		return time.Time{}, false // too short or too long: no need to build the error
	}
	t, err := time.Parse(layout, s)
	return t, err == nil
}

// parseDate is ParseDate for the dates parseDateFast does not read.
func parseDate(s string) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	if t, err := mail.ParseDate(s); err == nil && !hasZoneName(s) {
		return plausible(t)
	}
	c := dateComment.ReplaceAllString(s, " ")
	c = strings.Join(strings.Fields(c), " ")
	c = dateWeekday.ReplaceAllString(c, "")
	c = strings.ReplaceAll(c, ",", " ")
	c = strings.Join(strings.Fields(c), " ")
	if dateNumZone.MatchString(c) {
		c = c[:strings.LastIndexByte(c, ' ')] // "+0000 GMT": the offset wins
	}
	c = dateColonTZ.ReplaceAllString(c, "$1$2")
	if m := dateZoneWord.FindStringSubmatch(c); m != nil {
		off, ok := zones[strings.ToUpper(m[1])]
		if !ok && len(m[1]) <= 4 && isMonthOrDay(m[1]) {
			off = ""
		} else if !ok {
			off = "+0000"
		}
		if off != "" {
			c = c[:len(c)-len(m[1])] + off
		}
	}
	if t, err := mail.ParseDate(c); err == nil {
		return plausible(t)
	}
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, c); err == nil {
			return plausible(t)
		}
	}
	return time.Time{}, false
}

// hasZoneName reports whether s ends (before any comment) in an alphabetic
// zone that net/mail would read as UTC but that has another offset.
func hasZoneName(s string) bool {
	c := strings.TrimSpace(dateComment.ReplaceAllString(s, ""))
	m := dateZoneWord.FindStringSubmatch(c)
	if m == nil {
		return false
	}
	off, ok := zones[strings.ToUpper(m[1])]
	return ok && off != "+0000" && !dateNumZone.MatchString(c)
}

func isMonthOrDay(w string) bool {
	switch strings.ToLower(w) {
	case "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec",
		"am", "pm":
		return true
	}
	return false
}

func plausible(t time.Time) (time.Time, bool) {
	t = t.UTC()
	if t.Year() < 1970 || t.Year() > 9999 {
		return time.Time{}, false
	}
	return t, true
}
