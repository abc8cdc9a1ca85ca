// Package larkfake is a fake Lark/Feishu inside the test process: the
// Open API calls Courier's Lark adapter makes and the long-connection (ws)
// server, faithful to what oapi-sdk-go v3.11.0 sends and expects, so tests
// drive the real SDK against it. It is imported by tests only.
//
// What it fakes, read off the SDK's source (core, ws, service/im/v1,
// service/contact/v3):
//
//   - Tokens: auth/v3/tenant_access_token/internal checks app_id and
//     app_secret (10003, 10014 otherwise) and answers {"code":0,
//     "tenant_access_token":…,"expire":…} at the top level, as Lark does;
//     the same token again while it has more than 30 min (or half its
//     TTL) to live. Every other call needs "Authorization: Bearer <tenant
//     token>": none gets HTTP 400 code 99991661, an unknown or expired one
//     HTTP 400 code 99991663, the codes on which the SDK retries once.
//     ExpireTokens ends them all.
//   - Messages: im/v1/messages create (receive_id_type chat_id, open_id,
//     union_id, user_id, email; a user gets the bot's p2p chat) and
//     …/{id}/reply (reply_in_thread starts a thread, a reply in a thread
//     stays in it; root_id, parent_id, thread_id set as Lark sets them);
//     msg_type, JSON content, content size (150 KB text, 30 KB post and
//     card) and media keys are checked; an unknown receive_id or
//     message_id gets 230001. A uuid dedupes for an hour: a second create
//     or reply with it answers the first message and makes none (Sent
//     records new messages only, Calls every call). List (container chat
//     or thread, start_time/end_time in seconds, sort_type, page_size up
//     to 50, opaque page tokens bound to their query; as Lark's, the chat
//     container answers a thread's root but not its replies, except in a
//     topic chat) and get, which
//     answers a merge_forward message followed by its children (messages
//     added with UpperMessageID, every level, with upper_message_id set;
//     they are in no chat's history).
//   - Media: im/v1/images (image_type, at most 10 MB, not empty) and
//     im/v1/files (file_type, file_name, duration; at most 30 MB) answer
//     image_key/file_key; messages/{id}/resources/{key}?type=image|file
//     serves what AddResource (or the app's own image/file message) put
//     there, with the name in Content-Disposition; a key not in the
//     message, or asked with the other type, gets 234003.
//   - Chats: the list (im/v1/chats: the group chats the app is in, as a
//     tenant token lists them, so no p2p chat; page_size up to 100,
//     default 20; opaque page tokens; sorted by chat_id, for Lark's
//     create or activity time, which the fake does not keep) and one
//     chat (im/v1/chats/{id}); users (contact/v3/users/{id},
//     user_id_type open_id, union_id, user_id; 41050 for one the fake
//     does not know).
//   - Failures on demand (Fail) per route: HTTP 429 with code 99991400
//     and x-ogw-ratelimit-reset, a 5xx with a text/plain body as a
//     gateway answers, or any code and msg.
//   - The long connection: /callback/ws/endpoint checks AppID/AppSecret
//     (a bad pair gets a code the SDK takes as final) and answers a
//     one-use ws URL (device_id, service_id, ticket) with the full
//     ClientConfig (PingInterval, ReconnectCount, ReconnectInterval,
//     ReconnectNonce). The ws speaks pbbp2 frames: a ping (control,
//     type=ping) is answered by a pong carrying the ClientConfig; SendEvent
//     sends an event as a data frame (type=event, message_id, sum, seq,
//     trace_id, timestamp), SendEventSplit in parts; the client's
//     response frame (same headers plus biz_rt, payload {"code":200}) is
//     recorded (Acked, Ack). A used or unknown ticket is refused at the
//     handshake with Handshake-Status 514 (the SDK fetches a new one);
//     more than MaxConnections with Lark's ExceedConnLimit (the SDK stops).
//     Drop cuts every connection without a close frame.
//
// State a test sets up: AddUser, AddChat, AddMessage, AddResource; what
// the code under test did: Sent, Uploads, Messages (a chat's history, the
// app's own messages included), Calls, Tokens, Connections, Pings, Ack.
//
// What the SDK (v3.11.0) does that an adapter must know, read off its
// source (the token retry is pinned by TestTokenChecks and
// TestExpiredTokenRenewedThroughTheSDKRetry):
//
//   - Its retry on 99991663 re-reads the token it cached (for expire - 3
//     min), so a token Lark refused is not renewed by the SDK alone; a
//     token cache the adapter can empty (lark.WithTokenCache) and a
//     transport that empties it on 99991661/99991663 make the one retry
//     fetch a new token. WithTokenCache replaces a process-wide cache:
//     every client made after it uses it.
//   - Downloads (MessageResource.Get, Image.Get, File.Get) read the whole
//     body into memory, with no bound: to stream a resource into the
//     dropzone, GET it with the tenant token outside the SDK.
//   - The ws client handles each frame in a goroutine of its own and
//     joins a split event through a cache without a lock: two parts
//     handled at once can lose the event (about 1 in 150 runs here). The
//     split framing is therefore tested on the wire, without the SDK.
//   - A ClientConfig PingInterval of 0 makes the SDK ping in a tight loop;
//     the fake never sends one under 1 s.
//
// What it does not fake: Lark's own timers (it never redelivers an
// unacked event: a test sends it again), the webhook delivery of events
// (the adapter is the server there), app_access_token and marketplace
// apps, user tokens, scopes (every call is allowed; Fail gives 99991672),
// edits and recalls through the API, the chat list's order by time, and
// any route not listed (404). Codes Lark does not document for a case
// (an unknown chat or message: 230001; a resource not in the message:
// 234003; an unknown user: 41050; bad ws credentials: 10014) follow what
// Lark was reported to answer.
//
// Every request body is bounded (1 MiB for JSON, 11 and 31 MiB for
// uploads), as is every ws frame read (1 MiB) and the open connections.
package larkfake
