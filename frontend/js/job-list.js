// A job list's live refresh: every few seconds while the tab is visible, the lists
// are fetched from the page's fragment address (data-rows: /jobs/rows with the
// same filters) and replaced in place; nothing is fetched while the tab is hidden,
// and the lists are refreshed at once when it shows again.
(function () {
  "use strict";
  var box = document.getElementById("job-lists");
  if (!box || !window.fetch) return;
  var url = box.getAttribute("data-rows");
  var status = document.getElementById("live-status");
  var PERIOD = 5000;
  var timer = null;
  var busy = false;

  function say(text) { if (status) status.textContent = text; }

  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.text();
      })
      .then(function (html) {
        // Leave the lists alone while a form inside them (a cancel) is in use.
        if (box.contains(document.activeElement) && document.activeElement.tagName === "BUTTON") return;
        box.innerHTML = html;
        if (window.atriumTime) window.atriumTime.refresh(box);
        box.setAttribute("data-refreshed", String(Date.now()));
        say("Updated live");
      })
      .catch(function () { say("Live updates paused: the portal did not answer"); })
      .then(function () { busy = false; });
  }

  function start() {
    if (timer === null) timer = setInterval(refresh, PERIOD);
  }
  function stop() {
    if (timer !== null) { clearInterval(timer); timer = null; }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.hidden) { stop(); } else { refresh(); start(); }
  });
  if (!document.hidden) start();
  say("Updated live");
})();
