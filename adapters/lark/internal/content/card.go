package content

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// card converts an interactive message (a card) to readable text: its
// header's title, then the text of its elements in order (plain_text,
// lark_md and markdown contents, fields, notes, buttons' labels). It
// reads every card shape Lark has (the v1 {"header","elements"}, the 2.0
// {"schema","body":{"elements"}}, and the {"title","elements":[[...]]}
// the receive event carries) by walking the JSON in order and keeping
// the strings under "content", "text" and "title", skipping what is no
// text (callback values, URLs, config). Raw keeps the card itself.
func (p *parser) card(content string) error {
	dec := json.NewDecoder(strings.NewReader(content))
	w := &cardWalker{dec: dec}
	if err := w.value("", false, 0); err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("not one JSON value")
	}
	for _, t := range w.texts {
		p.blockBreak()
		switch {
		case t.title:
			p.text_.WriteString(t.s)
			p.md.WriteString(strong(escape(t.s, false)))
		case t.md:
			// lark_md and markdown elements are Markdown: read as a draft
			// is, so their formatting comes through and only safe links.
			p.lines(markdownLines(t.s))
		default:
			p.write(t.s)
		}
	}
	// one line per text in the plain text
	txt := strings.ReplaceAll(strings.TrimRight(p.text_.String(), "\n"), "\n\n", "\n")
	p.text_.Reset()
	p.text_.WriteString(txt)
	return nil
}

type cardText struct {
	s         string
	title, md bool
}

type cardWalker struct {
	dec   *json.Decoder
	texts []cardText
}

// skipKeys hold no text a reader wants: callback payloads, addresses,
// keys, layout.
var skipKeys = map[string]bool{
	"value": true, "url": true, "href": true, "multi_url": true, "behaviors": true,
	"config": true, "img_key": true, "image_key": true, "icon": true, "tag": true,
	"card_link": true, "template": true, "style": true,
	"width": true, "height": true, "name": true, "action_type": true, "type": true,
}

// textKeys hold text when their value is a string.
var textKeys = map[string]bool{"content": true, "text": true, "title": true, "subtitle": true}

// value reads one JSON value, under key, keeping its texts.
func (w *cardWalker) value(key string, header bool, depth int) error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	switch t := tok.(type) {
	case json.Delim:
		if depth >= maxDepth {
			// deeper than any card: its strings, as words, in order
			return w.flatten(t)
		}
		if t == '[' {
			for w.dec.More() {
				if err := w.value(key, header, depth+1); err != nil {
					return err
				}
			}
		} else {
			// An element's tag says whether its content is Markdown; it may
			// come before or after the content.
			tag, content := "", -1
			for w.dec.More() {
				kt, err := w.dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if k == "tag" {
					tt, err := w.dec.Token()
					if err != nil {
						return err
					}
					tag, _ = tt.(string)
					if d, ok := tt.(json.Delim); ok && (d == '{' || d == '[') {
						if err := w.drain(d, nil); err != nil {
							return err
						}
					}
					continue
				}
				if skipKeys[k] {
					if err := w.skip(); err != nil {
						return err
					}
					continue
				}
				n := len(w.texts)
				if err := w.value(k, header || k == "header", depth+1); err != nil {
					return err
				}
				if k == "content" && len(w.texts) == n+1 {
					content = n
				}
			}
			if content >= 0 && (tag == "markdown" || tag == "lark_md") && !w.texts[content].title {
				w.texts[content].md = true
			}
		}
		_, err = w.dec.Token() // the closing delimiter
		return err
	case string:
		if textKeys[key] {
			if s := strings.TrimSpace(clean(t)); s != "" {
				w.texts = append(w.texts, cardText{s: s, title: header && key != "subtitle" || key == "title" && depth == 1})
			}
		}
	}
	return nil
}

// skip reads one value and drops it, without recursion.
func (w *cardWalker) skip() error {
	tok, err := w.dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); ok && (d == '{' || d == '[') {
		return w.drain(d, nil)
	}
	return nil
}

// flatten keeps the strings of a too-deep value (opened by d) as one text.
func (w *cardWalker) flatten(d json.Delim) error {
	var words []string
	if err := w.drain(d, &words); err != nil {
		return err
	}
	if s := strings.TrimSpace(clean(strings.Join(words, " "))); s != "" {
		w.texts = append(w.texts, cardText{s: s})
	}
	return nil
}

// drain reads up to the end of the value just opened by open, without recursion,
// collecting its string values (not keys) into words when asked.
func (w *cardWalker) drain(open json.Delim, words *[]string) error {
	type frame struct {
		obj, wantKey bool
		key          string // the key of the value being read
	}
	stack := []frame{{obj: open == '{', wantKey: open == '{'}}
	for len(stack) > 0 {
		tok, err := w.dec.Token()
		if err != nil {
			return err
		}
		top := &stack[len(stack)-1]
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				stack = append(stack, frame{obj: true, wantKey: true})
			case '[':
				stack = append(stack, frame{})
			default:
				stack = stack[:len(stack)-1]
				if len(stack) > 0 && stack[len(stack)-1].obj {
					stack[len(stack)-1].wantKey = true
				}
			}
			continue
		case string:
			if top.obj && top.wantKey {
				top.wantKey = false
				top.key = t
				continue
			}
			if words != nil && !(top.obj && skipKeys[top.key]) {
				*words = append(*words, t)
			}
		}
		if top.obj {
			top.wantKey = true
		}
	}
	return nil
}
