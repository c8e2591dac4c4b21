// Administrators' announcements atop every signed-in page (GET /api/v1/announcements:
// those whose window is open), most severe first; the dashboard draws them itself.
(function () {
  "use strict";
  if (!window.fetch || document.getElementById("announcements")) return;
  var RANK = { critical: 0, warning: 1, info: 2 };
  fetch("/api/v1/announcements", { credentials: "same-origin", headers: { "Accept": "application/json" } })
    .then(function (res) { return res.ok ? res.json() : { announcements: [] }; })
    .then(function (body) {
      var list = (body.announcements || []).slice().sort(function (a, b) {
        return (RANK[a.severity] || 3) - (RANK[b.severity] || 3);
      });
      if (!list.length) return;
      var main = document.querySelector("main");
      if (!main) return;
      var box = document.createElement("section");
      box.id = "announcements";
      box.className = "announcements";
      box.setAttribute("aria-label", "Announcements");
      list.forEach(function (a) {
        var p = document.createElement("p");
        p.className = "announcement announcement-" + a.severity;
        p.setAttribute("role", a.severity === "critical" ? "alert" : "status");
        p.textContent = a.message;
        box.appendChild(p);
      });
      main.insertBefore(box, main.firstChild);
    })
    .catch(function () { /* no banner: the page is what matters */ });
})();
