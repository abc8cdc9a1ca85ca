package mime

import (
	"net/url"
	"regexp"
	"strings"
	"sync"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
)

// mdConverter is shared: a Converter holds no per-conversion state.
var mdConverter = sync.OnceValue(func() *converter.Converter {
	return converter.NewConverter(converter.WithPlugins(base.NewBasePlugin(), commonmark.NewCommonmarkPlugin()))
})

var cidRef = regexp.MustCompile(`(?i)\bcid:([^"'\s<>()]+)`)

// rewriteCIDs replaces the cid: references of html that name an inline
// artifact by its workspace-relative path. Content-IDs are compared exactly,
// then ignoring case; URL escapes are resolved (cid:a%40b names a@b).
func rewriteCIDs(html string, paths map[string]string) string {
	if len(paths) == 0 || !strings.Contains(strings.ToLower(html), "cid:") {
		return html
	}
	return cidRef.ReplaceAllStringFunc(html, func(m string) string {
		id := m[4:]
		if u, err := url.PathUnescape(id); err == nil {
			id = u
		}
		if p, ok := paths[id]; ok {
			return p
		}
		if p, ok := paths[strings.ToLower(id)]; ok {
			return p
		}
		return m
	})
}

// toMarkdown converts HTML to Markdown. The converter is another library's
// code run on hostile input: a panic in it is recovered and reported as an
// error, never allowed to take the message down.
func toMarkdown(html string) (md string, err error) {
	defer func() {
		if r := recover(); r != nil {
			md, err = "", panicError{r}
		}
	}()
	md, err = mdConverter().ConvertString(html)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(md), nil
}

type panicError struct{ v any }

func (e panicError) Error() string { return "converter panicked" }
