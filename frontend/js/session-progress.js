// A session's progress page: follows GET /api/v1/sessions/{id}/progress (server-sent
// events, one JSON object per change) and opens the session once it is ready.
// The event log grows as the start goes on; a warning (the time limit is near) and a
// failure with its log are shown as they come. Times are shown in the browser's zone.
(function () {
  "use strict";
  var card = document.getElementById("session");
  if (!card) return;
  var bar = document.getElementById("session-progress");
  var message = document.getElementById("session-message");
  var state = document.getElementById("session-state");
  var warning = document.getElementById("session-warning");
  var open = document.getElementById("session-open");
  var link = document.getElementById("session-open-link");
  var failure = document.getElementById("session-failure");
  var failureMessage = document.getElementById("session-failure-message");
  var log = document.getElementById("session-log");
  var events = document.getElementById("session-events");

  function localTime(iso) {
    var d = new Date(iso);
    return isNaN(d) ? iso : d.toLocaleTimeString();
  }
  function localTimes(root) {
    root.querySelectorAll("time[datetime]").forEach(function (t) {
      t.textContent = localTime(t.getAttribute("datetime"));
    });
  }
  localTimes(card);
  if (card.dataset.active !== "true" || !window.EventSource) return;
  // Opened at once only when the page was waiting for it (not when revisited later).
  var opened = card.dataset.ready === "true";

  function showEvents(list) {
    if (!events || !list) return;
    events.textContent = "";
    list.forEach(function (e) {
      var li = document.createElement("li");
      var t = document.createElement("time");
      t.setAttribute("datetime", e.at);
      t.textContent = localTime(e.at);
      li.appendChild(t);
      li.appendChild(document.createTextNode(" " + e.message));
      events.appendChild(li);
    });
  }

  // "Tell me when it is ready": the browser's notification, once allowed.
  var offer = document.getElementById("session-notify-offer");
  var wantNotice = false;
  if (offer && window.Notification && Notification.permission !== "denied") {
    offer.hidden = false;
    document.getElementById("session-notify").addEventListener("click", function () {
      Notification.requestPermission().then(function (answer) {
        wantNotice = answer === "granted";
        offer.textContent = wantNotice ? "You will be told when it is ready." : "The browser will not show notifications for this site.";
      });
    });
  }

  var source = new EventSource("/api/v1/sessions/" + encodeURIComponent(card.dataset.session) + "/progress");
  source.onmessage = function (event) {
    var p;
    try { p = JSON.parse(event.data); } catch (e) { return; }
    bar.value = p.progress;
    message.textContent = p.message;
    state.textContent = p.state;
    showEvents(p.events);
    if (p.warning) { warning.textContent = p.warning; warning.hidden = false; }
    if (p.failed) {
      failureMessage.textContent = "";
      var strong = document.createElement("strong");
      strong.textContent = "The session failed.";
      failureMessage.appendChild(strong);
      failureMessage.appendChild(document.createTextNode(" " + p.message));
      log.textContent = p.log || "";
      failure.hidden = false;
      message.hidden = true;
    }
    if (p.ready && p.url) {
      link.href = p.url;
      open.hidden = false;
      if (offer) offer.hidden = true;
      if (!opened) {
        opened = true;
        // Asked for, and the page is not in front: the browser says so.
        if (wantNotice && document.hidden && window.Notification && Notification.permission === "granted") {
          var n = new Notification("Your session is ready", { body: card.dataset.name || "", tag: "atrium-session-" + card.dataset.session });
          n.onclick = function () { window.focus(); window.location.assign(p.url); };
        }
        window.location.assign(p.url);
      }
    }
    if (p.state === "ended") {
      source.close();
      var stop = document.getElementById("stop-form");
      if (stop) stop.hidden = true;
    }
  };
})();
