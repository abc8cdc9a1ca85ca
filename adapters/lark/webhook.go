package lark

import (
	"net/http"

	"github.com/monoco/courier/adapters"
)

// newWebhook is the HTTP callback. (Being built.)
func newWebhook(r *receiver) adapters.Webhook {
	return adapters.WebhookFunc(func(sink adapters.Sink) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "lark webhook not built yet", http.StatusNotImplemented)
		})
	})
}
