// The start form: only the chosen app's options are shown (without this script every
// app's are, and only the chosen app's are used), and the last choices come back
// (app, environment, hours, and the GPU kind while one of it is free now).
(function () {
  "use strict";
  var form = document.getElementById("start-form");
  if (!form) return;
  var KEY = "atrium.session-form";
  function chosen() {
    var c = form.querySelector("input[name=kind]:checked");
    return c ? c.value : "";
  }
  function update() {
    var app = chosen();
    form.querySelectorAll(".app-fields").forEach(function (f) {
      f.hidden = f.dataset.app !== app;
      f.disabled = f.hidden;
    });
    // A field of some apps only (TensorBoard's log folder, a terminal's folder):
    // hidden, with its error, and not sent, for the others.
    form.querySelectorAll(".app-only").forEach(function (l) {
      var off = l.dataset.apps.split(" ").indexOf(app) < 0;
      l.hidden = off;
      l.querySelectorAll("input").forEach(function (i) { i.disabled = off; });
      var e = l.nextElementSibling;
      if (e && e.classList.contains("field-error")) { e.hidden = off; }
    });
  }

  function field(name) { return form.elements.namedItem(name); }
  function remember() {
    var last = {
      kind: chosen(),
      environment: field("environment") ? field("environment").value : "",
      hours: field("hours") ? field("hours").value : "",
      slice: field("slice") ? field("slice").value : null,
      gpus: field("gpus") ? field("gpus").value : ""
    };
    try { localStorage.setItem(KEY, JSON.stringify(last)); } catch (e) { /* private mode */ }
  }
  // Only on a fresh form: not over a choice in the address (?kind=) nor over what
  // a refused start sent back.
  function restore() {
    if (/[?&]kind=/.test(location.search) || document.getElementById("start-error")) return;
    var last;
    try { last = JSON.parse(localStorage.getItem(KEY) || "null"); } catch (e) { return; }
    if (!last) return;
    var app = form.querySelector("input[name=kind][value='" + String(last.kind).replace(/['\\]/g, "") + "']");
    if (app && !app.checked) {
      var name = field("name"), was = chosen();
      app.checked = true;
      // The name the form gave the app it opened with follows the app.
      if (name && name.value === (was === "notebook" ? "default" : was)) {
        name.value = app.value === "notebook" ? "default" : app.value;
      }
    }
    var env = field("environment");
    if (env && Array.prototype.some.call(env.options, function (o) { return o.value === last.environment; })) {
      env.value = last.environment;
    }
    if (field("hours") && last.hours) field("hours").value = last.hours;
    var slice = field("slice");
    if (slice && last.slice !== null) {
      var option = Array.prototype.find.call(slice.options, function (o) { return o.value === last.slice; });
      // A kind with none free now would queue: the default (what starts now) stays.
      if (option && +option.dataset.free > 0) {
        slice.value = last.slice;
        if (field("gpus") && last.gpus) field("gpus").value = last.gpus;
      }
    }
  }

  form.addEventListener("change", function (e) {
    if (e.target && e.target.name === "kind") update();
  });
  form.addEventListener("submit", remember);
  restore();
  update();
})();
