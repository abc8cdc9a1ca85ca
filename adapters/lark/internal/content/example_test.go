package content_test

import (
	"fmt"

	"github.com/monoco/courier/adapters/lark/internal/content"
)

func ExampleParse() {
	// A post as im.message.receive_v1 carries it, with its mentions.
	post := `{"title":"Release","content":[` +
		`[{"tag":"text","text":"ready, "},{"tag":"at","user_id":"@_user_1","user_name":"Bob"},{"tag":"text","text":"?"}],` +
		`[{"tag":"a","text":"notes","href":"https://example.com/notes"},{"tag":"img","image_key":"img_v2_1"}]]}`
	mentions := []content.Mention{{Key: "@_user_1", ID: "ou_bob", Name: "Bob"}}
	r, err := content.Parse("post", post, mentions, content.Names{})
	if err != nil {
		fmt.Println(err)
	}
	fmt.Println(r.Markdown)
	fmt.Printf("%+v\n", r.Resources)
	// Output:
	// **Release**
	//
	// ready, @Bob?
	// [notes](https://example.com/notes)\[image\]
	// [{Type:image Kind:image Key:img_v2_1 Name:}]
}

func ExampleFromMarkdown() {
	typ, c, _ := content.FromMarkdown("**Done**, @ou_bob: see [the log](https://example.com/log)")
	fmt.Println(typ, string(c))
	typ, c, _ = content.FromMarkdown("just words")
	fmt.Println(typ, string(c))
	// Output:
	// post {"zh_cn":{"content":[[{"tag":"text","text":"Done","style":["bold"]},{"tag":"text","text":", "},{"tag":"at","user_id":"ou_bob"},{"tag":"text","text":": see "},{"tag":"a","text":"the log","href":"https://example.com/log"}]]}}
	// text {"text":"just words"}
}
