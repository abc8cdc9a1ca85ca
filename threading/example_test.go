package threading_test

import (
	"fmt"

	"github.com/monoco/courier/threading"
)

// The worked example of seed 003: the second reply stays in the thread
// rooted at <a@example>, and its reply_to names the first reply.
func ExampleEmailThread() {
	t := threading.EmailThread(threading.Headers{
		MessageID:  "<c@example>",
		InReplyTo:  "<b@example>",
		References: "<a@example> <b@example>",
	}, "")
	fmt.Println(t.Key)
	fmt.Println(t.Parent, t.ReplyToID())
	fmt.Println(t.Root, t.RootID())
	// Output:
	// email-thread:a@example
	// b@example email_117242040f4755997d0a
	// a@example email_c7a46d9b72b6ae7a7ad6
}

// Replying to <b@example>, itself a reply to <a@example>.
func ExampleReplyHeaders() {
	irt, refs := threading.ReplyHeaders("<b@example>", "<a@example>", "<a@example>")
	fmt.Println(irt)
	fmt.Println(refs)
	fmt.Println(threading.ReplySubject("Re: hello"), "|", threading.ReplySubject("hello"))
	// Output:
	// <b@example>
	// [<a@example> <b@example>]
	// Re: hello | Re: hello
}

func ExampleSlack() {
	t := threading.Slack(threading.SlackRef{
		Channel: "C024BE91L", ChannelType: "channel",
		TS: "1355517599.000100", ThreadTS: "1355517523.000005",
	})
	fmt.Println(t.SessionID, t.SessionType, t.ThreadKey, t.ReplyTo)
	// Output: C024BE91L group 1355517523.000005 slack_C024BE91L_1355517523_000005
}
