// Package slackfake is a fake Slack inside the test process: the Web API
// methods Courier's Slack adapter calls and a Socket Mode websocket
// server, faithful to what slack-go (v0.35.0) sends and expects, so tests
// drive the real SDK against it. It is imported by tests only.
//
// What it fakes, read off slack-go's source and Slack's documentation:
//
//   - The Web API at APIURL() ("http://127.0.0.1:PORT/api/"): bodies
//     form-encoded (the token as the "token" field or a Bearer header) or
//     JSON (the token only as a Bearer header, as Slack requires), answered
//     {"ok":true,...} or HTTP 200 {"ok":false,"error":CODE}. A missing
//     token is not_authed, another token invalid_auth, the app token where
//     a bot token is wanted (and the reverse) not_allowed_token_type,
//     every token after RevokeTokens token_revoked (until AcceptTokens).
//     Unknown methods answer unknown_method. Methods: auth.test,
//     apps.connections.open, users.info, conversations.info,
//     conversations.open, conversations.history, conversations.replies,
//     users.conversations, chat.postMessage, files.getUploadURLExternal,
//     the upload POST to the upload_url, files.completeUploadExternal.
//   - Failures on demand (Fail), of a method or of a file transfer
//     (FileDownload, FileUpload): HTTP 429 with Retry-After (slack-go's
//     RateLimitedError), another HTTP status, or an error code with
//     ok:false.
//   - Files (AddFile) at url_private and url_private_download on the fake's
//     host: the bytes with the bot token as Bearer; without it, as Slack
//     does, a 302 to the sign-in page "/?redir=<path>", which answers an
//     HTML page with 200 (slack-go's GetFile spots that redirect). A file
//     out of the token's scopes (RestrictFile) answers the HTML page with
//     200 at once, which GetFile returns as the file without an error.
//   - State a test sets up: users (AddUser; the bot's own user is there),
//     conversations (AddConversation; the id's letter and is_* fields say
//     what it is, is_member whether the bot is in it), messages
//     (AddMessage, or AddRawMessage to keep every field of a corpus
//     message); and what the code under test did: Posts, Uploads, Calls.
//     Posts and uploads join the history, so a reply can be read back.
//   - Socket Mode: apps.connections.open hands out a one-use
//     ws://…/link/?ticket=… URL; the connection gets hello, then a
//     websocket ping every PingInterval; SendEvent and SendEnvelope frame
//     envelopes as Slack does (to the newest connection, waiting for one),
//     acks ({"envelope_id":…}) are recorded (Acked, Unacked; an ack of
//     20 KiB or more is ignored, as Slack ignores it); Redeliver repeats
//     an envelope with retry_attempt+1 and retry_reason "timeout";
//     Disconnect sends {"type":"disconnect"} and closes; Drop closes the
//     TCP connection with no frame; SilencePings leaves the connections
//     open now silent (slack-go drops them after its ping interval; the
//     next connection is pinged). Connections, OpenConnections,
//     WaitConnections and Pongs show what the client did.
//
// What it does not fake: Slack's own timers (it never redelivers an
// unacked envelope by itself, nor sends a refresh_requested disconnect
// after hours: tests call Redeliver and Disconnect), rate limits by tier
// (only Fail), scopes (every method is allowed to the right token type),
// the Events API over HTTP (the adapter's webhook is the server there),
// edits and deletions through the Web API, and any method not listed.
// conversations.history pages newest first from latest down to oldest
// whatever bounds are given; conversations.replies returns the parent
// first on the first page only. Where Slack's exact answer is not
// documented (thread_ts naming no message: thread_not_found; a malformed
// one: invalid_thread_ts) the fake follows what Slack was reported to
// answer.
//
// Every request body is bounded (1 MiB for methods, Options.MaxUpload for
// an upload), as is every websocket frame read (1 MiB).
package slackfake
