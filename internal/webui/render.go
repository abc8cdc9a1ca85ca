package webui

import (
	"bytes"
	"html/template"
	"strings"

	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// A message's body is Markdown written from mail anyone may send, so it is
// rendered in two layers, each enough alone:
//
//  1. goldmark without raw HTML (its default: an HTML block or tag in the
//     Markdown is dropped, not passed through) and with its filter of
//     dangerous link destinations (javascript:, vbscript:, file:, data:);
//     every image becomes a link saying so, so nothing remote loads when
//     the page opens (a tracking pixel tells the sender you read it);
//  2. bluemonday's UGC policy over goldmark's output: an allowlist of
//     elements and attributes (no script, style, iframe, form, no on*
//     handler), links only to http, https and mailto, each made
//     rel="nofollow noreferrer" and opened in a new tab.
//
// bluemonday is the second layer because an allowlist over the final
// HTML holds whatever the Markdown renderer does, now and after an
// upgrade or a new extension; the page's Content-Security-Policy (no
// inline script, images from this origin only) is a third.

var md = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(imagesAsLinks{}, 100))),
)

var policy = func() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowAttrs("class").Matching(bluemonday.SpaceSeparatedTokens).OnElements("span", "code")
	return p
}()

// imagesAsLinks replaces each image by a link to it, its text the image's
// alt text: remote images are not loaded by default.
type imagesAsLinks struct{}

func (imagesAsLinks) Transform(doc *ast.Document, reader text.Reader, pc parser.Context) {
	var images []*ast.Image
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if img, ok := n.(*ast.Image); ok && entering {
			images = append(images, img)
		}
		return ast.WalkContinue, nil
	})
	for _, img := range images {
		link := ast.NewLink()
		link.Destination, link.Title = img.Destination, img.Title
		alt := strings.TrimSpace(string(img.Text(reader.Source()))) //nolint:staticcheck // the alt text as written
		if alt == "" {
			alt = "image"
		}
		link.AppendChild(link, ast.NewString([]byte("[image not loaded: "+alt+"]")))
		img.Parent().ReplaceChild(img.Parent(), img, link)
	}
}

// renderBody is body as safe HTML.
func renderBody(body string) template.HTML {
	var buf bytes.Buffer
	if err := md.Convert([]byte(body), &buf); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(body) + "</pre>")
	}
	return template.HTML(policy.SanitizeBytes(buf.Bytes()))
}
