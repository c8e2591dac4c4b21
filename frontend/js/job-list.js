// A job list's live refresh: every few seconds while the tab is visible, the lists
// are fetched from the page's fragment address (data-rows: /jobs/rows with the
// same filters) and replaced in place; nothing is fetched while the tab is hidden,
// and the lists are refreshed at once when it shows again. Nothing is replaced while
// the lists are in use (the pointer over them, the focus in a control of theirs, a
// confirmation open), and the focus stays where it was.
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

  // What identifies the focused element across a redraw of the lists.
  function focusKey(el) {
    if (!el || el === document.body || !box.contains(el)) return null;
    if (el.id) return { id: el.id };
    var href = el.getAttribute && el.getAttribute("href");
    return href ? { href: href } : null;
  }

  var hovered = false;
  box.addEventListener("pointerenter", function () { hovered = true; });
  box.addEventListener("pointerleave", function () { hovered = false; });
  function inUse() {
    var active = document.activeElement;
    var focusedInside = active && active !== document.body && box.contains(active) &&
      /^(BUTTON|INPUT|SELECT|TEXTAREA|SUMMARY)$/.test(active.tagName);
    return hovered || focusedInside || box.querySelector("details[open]") !== null;
  }

  function refresh() {
    if (busy || document.hidden) return;
    busy = true;
    fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (res) {
        if (!res.ok) throw new Error("HTTP " + res.status);
        return res.text();
      })
      .then(function (html) {
        // Leave the lists alone while someone is at them: a confirmation open, the
        // pointer over them, or the focus in them (a cancel, a reason being typed).
        if (inUse()) return;
        var focused = focusKey(document.activeElement);
        box.innerHTML = html;
        // A refresh keeps the keyboard's place: the same element (by id, or a
        // link by where it leads) has the focus again.
        if (focused) {
          var again = focused.id ? document.getElementById(focused.id)
            : box.querySelector('a[href="' + focused.href.replace(/["\\]/g, "") + '"]');
          if (again) again.focus();
        }
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
