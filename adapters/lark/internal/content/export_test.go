package content

import "github.com/monoco/courier/internal/mdsafe"

// UnescapeMarkdown lets the tests read Markdown text as FromMarkdown does.
var UnescapeMarkdown = mdsafe.Unescape
