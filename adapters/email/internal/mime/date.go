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
