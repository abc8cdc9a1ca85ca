package content

// UnescapeMarkdown lets the tests read Markdown text as FromMarkdown does.
var UnescapeMarkdown = unescapeMarkdown
