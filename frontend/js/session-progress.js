// A session's progress page: follows GET /api/v1/sessions/{id}/progress (server-sent
// events, one JSON object per change) and opens the session once it is ready.
// A warning (the time limit is near) and a failure's log are shown as they come.
(function () {
  "use strict";
  var card = document.getElementById("session");
  if (!card || card.dataset.active !== "true" || !window.EventSource) return;
  var bar = document.getElementById("session-progress");
  var message = document.getElementById("session-message");
  var state = document.getElementById("session-state");
  var warning = document.getElementById("session-warning");
  var open = document.getElementById("session-open");
  var link = document.getElementById("session-open-link");
  var log = document.getElementById("session-log");
  // Opened at once only when the page was waiting for it (not when revisited later).
  var opened = card.dataset.ready === "true";

  var source = new EventSource("/api/v1/sessions/" + encodeURIComponent(card.dataset.session) + "/progress");
  source.onmessage = function (event) {
    var p;
    try { p = JSON.parse(event.data); } catch (e) { return; }
    bar.value = p.progress;
    message.textContent = p.message;
    state.textContent = p.state;
    if (p.warning) { warning.textContent = p.warning; warning.hidden = false; }
    if (p.log) { log.textContent = p.log; log.hidden = false; }
    if (p.ready && p.url) {
      link.href = p.url;
      open.hidden = false;
      if (!opened) { opened = true; window.location.assign(p.url); }
    }
    if (p.state === "ended") {
      source.close();
      var stop = document.getElementById("stop-form");
      if (stop) stop.hidden = true;
    }
  };
})();
