package mrkdwn

import (
	"bytes"
	"encoding/json"
	"strings"
)

// maxRefs bounds how many ids of each kind Refs returns: the caller looks
// each up over the network, and a message is what an outsider writes.
const maxRefs = 100

// Refs lists the user and channel ids a message's text and blocks mention,
// in order of first mention, each once, so the caller can look their names
// up (users.info, conversations.info) before converting. Only well-formed
// ids are listed (letters and digits, at most 32), at most 100 of each.
func Refs(text string, blocks json.RawMessage) (users, channels []string) {
	r := refs{seen: map[string]bool{}}
	r.text(text)
	dec := json.NewDecoder(bytes.NewReader(blocks))
	// Tokens, not a tree: no depth of nesting costs more than its size.
	key, inObject := "", []bool{}
	expectKey := false
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{':
				inObject = append(inObject, true)
				expectKey = true
			case '[':
				inObject = append(inObject, false)
				expectKey = false
			default:
				if len(inObject) > 0 {
					inObject = inObject[:len(inObject)-1]
				}
				expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
			}
			continue
		case string:
			if expectKey {
				key = t
				expectKey = false
				continue
			}
			switch key {
			case "user_id":
				r.add(&r.users, t)
			case "channel_id":
				r.add(&r.channels, t)
			case "text":
				r.text(t)
			}
		}
		expectKey = len(inObject) > 0 && inObject[len(inObject)-1]
	}
	return r.users, r.channels
}

type refs struct {
	users, channels []string
	seen            map[string]bool
}

// text finds <@U…> and <#C…> in mrkdwn.
func (r *refs) text(s string) {
	for {
		i := strings.IndexByte(s, '<')
		if i < 0 || i+2 >= len(s) {
			return
		}
		s = s[i+1:]
		end := strings.IndexAny(s, "|>")
		if end < 0 {
			return
		}
		switch s[0] {
		case '@':
			r.add(&r.users, s[1:end])
		case '#':
			r.add(&r.channels, s[1:end])
		}
	}
}

func (r *refs) add(list *[]string, id string) {
	if !validID(id) || len(*list) >= maxRefs {
		return
	}
	k := "@" // users and channels are distinct namespaces
	if list == &r.channels {
		k = "#"
	}
	if r.seen[k+id] {
		return
	}
	r.seen[k+id] = true
	*list = append(*list, id)
}

func validID(id string) bool {
	if id == "" || len(id) > 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !wordByte(id[i]) {
			return false
		}
	}
	return true
}
