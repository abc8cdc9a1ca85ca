package lark

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/monoco/courier/adapters"
	"github.com/monoco/courier/adapters/chatsync"
)

// The webhook (courier.adapters.lark.mode: webhook) is Lark's HTTP event
// subscription, mounted at POST /webhook/lark. Lark's SDK has a dispatcher
// for it (event/dispatcher), but it is not enough: it checks the
// verification token only on url_verification, answers 500 to a forged
// request (which reads as "retry"), compares the signature with ==, has
// no timestamp window, and decrypts without checking the padding (it cuts
// the plaintext between the first '{' and the last '}'). So the checks are
// ours; the algorithms are the SDK's (larkevent.EventDecrypt, Signature):
//
//   - encrypted bodies are {"encrypt": base64(IV ‖ AES-256-CBC(JSON))},
//     the key sha256(encrypt_key), PKCS7 padding;
//   - X-Lark-Signature is hex(sha256(X-Lark-Request-Timestamp ‖
//     X-Lark-Request-Nonce ‖ encrypt_key ‖ raw body));
//   - the verification token is header.token (schema 2.0) or the top-level
//     token (schema 1.0 and url_verification).
//
// Every request is verified before anything of it is handed on; a request
// refused writes nothing, and responses and logs never quote it.

const (
	// webhookMaxBody bounds a request: Lark's events are a few KiB (a
	// message's content is at most 150 KB), base64 adds a third.
	webhookMaxBody = 1 << 20
	// webhookBudget is how long a request may take to make its event
	// durable. Lark waits 3 s for an answer and retries otherwise; a 503
	// before that says "not stored" plainly, where a 200 after the
	// deadline would not be read. An event whose resources take longer
	// to fetch is answered 503 every time: the catch-up (Failed) then
	// stores it from the chat's history, with no such deadline.
	webhookBudget = 2500 * time.Millisecond
	// webhookSkew is how far a signed request's timestamp may be from now,
	// either way: a captured request replays for at most that long (and
	// its message is then a duplicate).
	webhookSkew = 5 * time.Minute
)

// Lark's request headers for the signature.
const (
	headerTimestamp = "X-Lark-Request-Timestamp"
	headerNonce     = "X-Lark-Request-Nonce"
	headerSignature = "X-Lark-Signature"
)

// challengeRE is what a challenge may be: Lark's are UUIDs or short
// tokens; anything else is not echoed.
var challengeRE = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,256}$`)

// webhook is the HTTP callback of one provider: Lark's checks (open) and
// its event (parse) on the engine's endpoint (chatsync.Webhook), which
// answers a success only once the event is durable and, on failure, a 5xx
// (Lark retries), a gap and a catch-up pass.
type webhook struct {
	r *receiver
	// token is sha256 of verification_token (compared in constant time
	// whatever the length); hasToken says it is set.
	token    [32]byte
	hasToken bool
	// key is encrypt_key, for the signature; aesKey is sha256 of it.
	key    string
	aesKey [32]byte

	// now is the clock of the timestamp window and of the paced log;
	// time.Now, swapped in tests.
	now func() time.Time

	// flights are the messages being handled by requests: a redelivery
	// that arrives while the first try is storing waits for it instead
	// of storing a second time. An entry lives only while a request is in
	// the handler, so the service's connection limit bounds the map.
	flights chatsync.Joiner[string]
	// hook is the endpoint; its Budget bounds a request's handling
	// (webhookBudget; tests shorten it).
	hook *chatsync.Webhook
}

// newWebhook is the HTTP callback of webhook mode.
func newWebhook(r *receiver) adapters.Webhook {
	wh := &webhook{r: r, now: time.Now}
	if t := r.a.cfg.VerificationToken.Reveal(); t != "" {
		wh.token, wh.hasToken = sha256.Sum256([]byte(t)), true
	}
	if k := r.a.cfg.EncryptKey.Reveal(); k != "" {
		wh.key, wh.aesKey = k, sha256.Sum256([]byte(k))
	}
	wh.hook = &chatsync.Webhook{
		Name: "lark", MaxBody: webhookMaxBody, TooLarge: "lark: request body over 1 MiB",
		JSONOnly: "lark: the body must be JSON (Content-Type: application/json)",
		Budget:   webhookBudget, Verify: wh.open, Parse: wh.parse, OK: success,
		Challenge: chatsync.URLVerification(challengeRE, "lark: the body is not a Lark event or url_verification",
			"lark: url_verification without a valid challenge"),
		// Lark retries a 5xx (after 15 s, 5 min, 1 h, 6 h).
		FailStatus: http.StatusInternalServerError, NotStored: "lark: event not stored",
		NotStoredInTime: "lark: event not stored in time", NotStoredLog: "lark: webhook event not stored; Lark will retry",
		CatchUp: r.catchUp, Health: &r.a.health, Log: r.a.log, Now: func() time.Time { return wh.now() },
	}
	return wh
}

// Handler serves POST /webhook/lark, handing verified events to sink.
func (wh *webhook) Handler(sink adapters.Sink) http.Handler { return wh.hook.Handler(sink) }

// webhookBody is what a request's (decrypted) body says of itself.
type webhookBody struct {
	Type      string `json:"type"`
	Challenge string `json:"challenge"`
	Token     string `json:"token"`
	Header    *struct {
		Token string `json:"token"`
	} `json:"header"`
}

// token is the verification token the body carries: the header's in
// schema 2.0, else the top-level one (schema 1.0, url_verification), as
// the SDK reads it.
func (b *webhookBody) token() string {
	if b.Header != nil {
		return b.Header.Token
	}
	return b.Token
}

// parse reads the event a verified request carries.
func (wh *webhook) parse(plain []byte) (chatsync.Delivery, *chatsync.Refusal) {
	ev, err := parseEvent(plain)
	if err != nil {
		return chatsync.Delivery{}, chatsync.Refuse(http.StatusBadRequest, "lark: the body is not an event")
	}
	ev.via = "webhook"
	return chatsync.Delivery{ID: clip(ev.Header.EventID, 80), Handle: func(ctx context.Context, sink adapters.Sink) error {
		return wh.handleOnce(ctx, sink, ev)
	}}, nil
}

// success is Lark's answer to an event stored.
func success(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"msg":"success"}`)
}

// open verifies a request and returns its plaintext body: decrypted when
// encrypt_key is set (a plaintext body is then refused: Lark encrypts
// every request of an app that has a key), its signature and timestamp
// checked, its verification token checked. url_verification is the one
// request Lark does not sign (nor does the SDK check it); it is answered
// only when it decrypts and carries the token, and a signature it does
// carry must be right.
func (wh *webhook) open(h http.Header, raw []byte) ([]byte, *chatsync.Refusal) {
	if !wh.hasToken && wh.key == "" {
		// The config refuses this already; nothing unverified is ever
		// accepted.
		return nil, chatsync.Refuse(http.StatusUnauthorized, "lark: neither verification_token nor encrypt_key is set; every request is refused")
	}
	var outer struct {
		Encrypt *string `json:"encrypt"`
	}
	if err := json.Unmarshal(raw, &outer); err != nil {
		return nil, chatsync.Refuse(http.StatusBadRequest, "lark: the body is not a JSON object (or its encrypt is not a string)")
	}
	plain, signed := raw, false
	switch {
	case wh.key == "" && outer.Encrypt != nil:
		return nil, chatsync.Refuse(http.StatusBadRequest, "lark: the body is encrypted but encrypt_key is not set")
	case wh.key != "" && outer.Encrypt == nil:
		return nil, chatsync.Refuse(http.StatusUnauthorized, "lark: a plaintext body, but encrypt_key is set (Lark encrypts every request)")
	case wh.key != "":
		if h.Get(headerSignature) != "" {
			if rf := wh.verify(h, raw); rf != nil {
				return nil, rf
			}
			signed = true
		}
		var err error
		plain, err = decryptWebhook(*outer.Encrypt, &wh.aesKey)
		if err == nil && !json.Valid(plain) {
			err = errors.New("lark: the decrypted body is not JSON (encrypted with another key?)")
		}
		if err != nil {
			if !signed {
				// Not one reason per failure to an unsigned request:
				// telling bad padding from bad JSON would make a
				// padding oracle of the endpoint.
				return nil, chatsync.Refuse(http.StatusBadRequest, "lark: the body does not decrypt with encrypt_key")
			}
			return nil, chatsync.Refuse(http.StatusBadRequest, err.Error())
		}
	}
	var b webhookBody
	if err := json.Unmarshal(plain, &b); err != nil {
		return nil, chatsync.Refuse(http.StatusBadRequest, "lark: the body is not a Lark event or url_verification")
	}
	if wh.key != "" && !signed && b.Type != "url_verification" {
		return nil, chatsync.Refuse(http.StatusUnauthorized, "lark: request not signed (X-Lark-Signature missing)")
	}
	if wh.hasToken {
		got := sha256.Sum256([]byte(b.token()))
		if subtle.ConstantTimeCompare(got[:], wh.token[:]) != 1 {
			return nil, chatsync.Refuse(http.StatusUnauthorized, "lark: verification token missing or wrong")
		}
	}
	return plain, nil
}

// verify checks X-Lark-Signature (in constant time) and that the signed
// timestamp is within webhookSkew of now.
func (wh *webhook) verify(h http.Header, raw []byte) *chatsync.Refusal {
	ts, nonce := h.Get(headerTimestamp), h.Get(headerNonce)
	sig, err := hex.DecodeString(strings.TrimSpace(h.Get(headerSignature)))
	if err != nil || len(sig) != sha256.Size {
		return chatsync.Refuse(http.StatusUnauthorized, "lark: X-Lark-Signature is not a SHA-256 in hex")
	}
	d := sha256.New()
	d.Write([]byte(ts))
	d.Write([]byte(nonce))
	d.Write([]byte(wh.key))
	d.Write(raw)
	if subtle.ConstantTimeCompare(d.Sum(nil), sig) != 1 {
		return chatsync.Refuse(http.StatusUnauthorized, "lark: X-Lark-Signature does not match")
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(ts), 10, 64)
	if err != nil {
		return chatsync.Refuse(http.StatusUnauthorized, "lark: X-Lark-Request-Timestamp is not a time in seconds")
	}
	now := wh.now().Unix()
	// Compared in seconds, without time.Duration (a huge timestamp would
	// overflow it).
	if secs < now-int64(webhookSkew/time.Second) || secs > now+int64(webhookSkew/time.Second) {
		return chatsync.Refuse(http.StatusUnauthorized, "lark: X-Lark-Request-Timestamp is more than 5 minutes from now")
	}
	return nil
}

// handleOnce is r.handle, with concurrent deliveries of one message
// joined: a redelivery that arrives while the first try is storing waits
// for it (within its own deadline) and, if the first try failed, tries
// itself. One already stored is answered by handle's dedupe.
func (wh *webhook) handleOnce(ctx context.Context, sink adapters.Sink, ev event) error {
	return wh.flights.Do(ctx, flightKey(ev), func(ctx context.Context) error { return wh.r.handle(ctx, sink, ev) })
}

// decryptWebhook decrypts an encrypted body's "encrypt" with key
// (sha256 of encrypt_key): base64 of a 16-byte IV and AES-256-CBC
// blocks, PKCS7-padded. The padding is checked in constant time, and
// entirely: any ciphertext accepted is exactly what encrypting its
// plaintext with the key and that IV gives.
func decryptWebhook(encrypt string, key *[32]byte) ([]byte, error) {
	data, err := base64.StdEncoding.DecodeString(encrypt)
	if err != nil {
		return nil, errors.New("lark: encrypt is not base64")
	}
	if len(data) < 2*aes.BlockSize {
		return nil, errors.New("lark: encrypt is too short (an IV and at least one AES block)")
	}
	if len(data)%aes.BlockSize != 0 {
		return nil, errors.New("lark: encrypt is not whole AES blocks (truncated?)")
	}
	block, err := aes.NewCipher(key[:])
	if err != nil {
		return nil, errors.New("lark: AES key unusable")
	}
	out := make([]byte, len(data)-aes.BlockSize)
	cipher.NewCBCDecrypter(block, data[:aes.BlockSize]).CryptBlocks(out, data[aes.BlockSize:])
	n, ok := pkcs7Pad(out)
	if !ok {
		return nil, errors.New("lark: encrypt has bad padding (encrypted with another key?)")
	}
	return out[:len(out)-n], nil
}

// pkcs7Pad returns the length of b's PKCS7 padding (1 to 16 bytes, each
// its length), in time independent of b's bytes. len(b) >= 16.
func pkcs7Pad(b []byte) (int, bool) {
	n := int(b[len(b)-1])
	good := subtle.ConstantTimeLessOrEq(1, n) & subtle.ConstantTimeLessOrEq(n, aes.BlockSize)
	for i := 1; i <= aes.BlockSize; i++ {
		inPad := subtle.ConstantTimeLessOrEq(i, n)
		same := subtle.ConstantTimeByteEq(b[len(b)-i], byte(n))
		good &= same | (inPad ^ 1)
	}
	return n, good == 1
}
