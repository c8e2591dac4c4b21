// Every <time datetime> of a page in the browser's local time, with relative
// wording ("in 5 min", "3 h ago", "just now"); the server writes them in UTC
// (server/src/http/pages/when.rs, whose wording this follows). Elements with
// data-relative show the relative form (refreshed each minute) and the local time
// in their title; the others the local time, the relative form in their title.
// Elements added later (live refresh) are rewritten by atriumTime.refresh(root).
(function () {
  "use strict";

  function span(secs) {
    var MIN = 60, HOUR = 3600, DAY = 86400;
    if (secs < MIN) return secs + " s";
    if (secs < HOUR) return Math.floor((secs + MIN / 2) / MIN) + " min";
    if (secs < 10 * HOUR) {
      var mins = Math.floor((secs + MIN / 2) / MIN);
      var h = Math.floor(mins / 60), m = mins % 60;
      return m === 0 ? h + " h" : h + " h " + m + " min";
    }
    if (secs < 2 * DAY) return Math.floor((secs + HOUR / 2) / HOUR) + " h";
    return Math.floor((secs + DAY / 2) / DAY) + " days";
  }

  function relative(ms, now) {
    var delta = Math.trunc((ms - now) / 1000);
    if (Math.abs(delta) < 45) return "just now";
    var words = span(Math.abs(delta));
    return delta > 0 ? "in " + words : words + " ago";
  }

  var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
  function two(n) { return (n < 10 ? "0" : "") + n; }

  function local(d) {
    return d.getDate() + " " + MONTHS[d.getMonth()] + " " + d.getFullYear() + ", " +
      two(d.getHours()) + ":" + two(d.getMinutes());
  }

  function rewrite(el, now) {
    var ms = Date.parse(el.getAttribute("datetime"));
    if (isNaN(ms)) return;
    var d = new Date(ms);
    var rel = relative(ms, now);
    if (el.hasAttribute("data-relative")) {
      el.textContent = rel;
      el.title = local(d);
    } else {
      el.textContent = local(d);
      el.title = rel;
    }
  }

  function refresh(root) {
    var now = Date.now();
    var els = (root || document).querySelectorAll("time[datetime]");
    for (var i = 0; i < els.length; i++) rewrite(els[i], now);
  }

  window.atriumTime = { refresh: refresh, relative: relative, span: span };
  refresh(document);
  setInterval(function () {
    if (!document.hidden) refresh(document);
  }, 60000);
})();
