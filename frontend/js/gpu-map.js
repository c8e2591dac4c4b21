// The GPU map's live refresh (/cluster, /admin/nodes): while the page is visible,
// GET the map's JSON (data-refresh, /api/v1/cluster/gpus) every few seconds and
// update each slice in place (found by its data-key): its state's class and
// letter, its holder, its title and accessible label; and the free count per
// type. A map whose layout changed (a node added) is left as it is: reloading the
// page shows it.
(function () {
  "use strict";
  var map = document.getElementById("gpu-map-nodes");
  if (!map || !window.fetch) return;
  var url = map.dataset.refresh;
  var status = document.getElementById("gpu-map-status");
  var free = document.getElementById("gpu-free-types");
  var EVERY_MS = 5000;
  var LETTERS = { free: "F", used: "U", drained: "D", absent: "A" };
  var timer = null;
  var failures = 0;

  function say(text) {
    if (status) status.textContent = text;
  }

  function what(slice) {
    var span = document.createElement("span");
    span.className = "slice-what";
    var h = slice.holder;
    if (h) {
      if (h.link) {
        var a = document.createElement("a");
        a.href = "/jobs/" + encodeURIComponent(h.id);
        a.textContent = h.display_id;
        span.appendChild(a);
      } else {
        span.appendChild(document.createTextNode(h.display_id));
      }
      span.appendChild(document.createTextNode(" " + h.user));
    } else {
      span.textContent = slice.state === "used" ? "in use" : slice.state;
    }
    return span;
  }

  function update(slice) {
    var cell = map.querySelector('[data-key="' + CSS.escape(slice.key) + '"]');
    if (!cell) return;
    if (cell.title === slice.describe && cell.classList.contains(slice.state)) return;
    cell.className = "slice " + slice.state;
    cell.title = slice.describe;
    cell.setAttribute("aria-label", slice.describe);
    var mark = document.createElement("span");
    mark.className = "slice-mark";
    mark.setAttribute("aria-hidden", "true");
    mark.textContent = LETTERS[slice.state] || "?";
    cell.replaceChildren(
      mark,
      document.createTextNode(" " + slice.label),
      document.createElement("br"),
      what(slice)
    );
  }

  function apply(data) {
    (data.nodes || []).forEach(function (node) {
      (node.gpus || []).forEach(function (gpu) {
        (gpu.slices || []).forEach(update);
      });
    });
    if (free) {
      free.textContent = (data.types || [])
        .map(function (t) {
          return t.free + " of " + t.total + " " + t.name + " free";
        })
        .join("; ");
    }
    say("Updated " + new Date().toLocaleTimeString() + ".");
  }

  function poll() {
    timer = null;
    if (document.visibilityState !== "visible") return;
    fetch(url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.json();
      })
      .then(function (data) {
        failures = 0;
        apply(data);
      })
      .catch(function () {
        failures += 1;
        say("Could not refresh the map; trying again.");
      })
      .then(schedule);
  }

  function schedule() {
    if (timer === null && document.visibilityState === "visible") {
      timer = setTimeout(poll, EVERY_MS * Math.min(1 + failures, 6));
    }
  }

  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "visible") {
      if (timer !== null) clearTimeout(timer);
      timer = null;
      poll();
    }
  });
  schedule();
})();
