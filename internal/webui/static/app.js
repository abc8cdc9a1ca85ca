// The live feed: each event of /ui/events reloads the page's content in
// place (the page works without this script; it is then only static).
"use strict";
(function () {
  if (!document.body || document.body.dataset.live !== "on" || !window.EventSource) return;
  var state = document.getElementById("live-state");
  var pending = false, deferred = false;
  // busy: the person is typing in the page (a field has the focus, or
  // holds text it did not come with, as a reject's reason): an update
  // waits until they leave it, rather than wipe what they wrote.
  function busy() {
    var main = document.getElementById("main");
    if (!main) return false;
    var a = document.activeElement;
    if (a && main.contains(a) && /^(INPUT|TEXTAREA|SELECT)$/.test(a.tagName)) return true;
    var fields = main.querySelectorAll("input, textarea");
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].type !== "hidden" && fields[i].value !== fields[i].defaultValue) return true;
    }
    return false;
  }
  document.addEventListener("focusout", function () {
    setTimeout(function () { if (deferred && !busy()) { deferred = false; reload(); } }, 0);
  });
  function reload() {
    // A message does not change; its page keeps the reader's place.
    if (pending || location.pathname.indexOf("/ui/message/") === 0) return;
    if (busy()) { deferred = true; return; }
    pending = true;
    setTimeout(function () {
      fetch(location.pathname.indexOf("/ui/outbound/") === 0 ? "/ui/outbound" : location.href, { credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : null; })
        .then(function (html) {
          pending = false;
          if (!html) return;
          var doc = new DOMParser().parseFromString(html, "text/html");
          var fresh = doc.getElementById("main"), main = document.getElementById("main");
          if (busy()) { deferred = true; return; }
          if (fresh && main) {
            var next = document.importNode(fresh, true);
            // The notice or error answering the person's own action (an
            // approval, a retry) stays until they leave the page: the
            // update that action causes must not wipe its answer.
            ["error", "notice"].forEach(function (id) {
              var old = document.getElementById(id);
              if (old && !next.querySelector("#" + id)) next.insertBefore(old, next.firstChild);
            });
            main.replaceWith(next);
          }
          window.courierUpdates = (window.courierUpdates || 0) + 1;
        })
        .catch(function () { pending = false; });
    }, 100);
  }
  var es = new EventSource("/ui/events");
  es.onopen = function () { if (state) state.textContent = "live"; };
  es.onerror = function () { if (state) state.textContent = "reconnecting…"; };
  ["inbound", "delivered", "dead", "state"].forEach(function (kind) {
    es.addEventListener(kind, function (e) {
      window.courierLastEvent = { kind: kind, id: e.data, at: Date.now() };
      reload();
    });
  });
})();
