// The start form: only the chosen app's options are shown (without this script every
// app's are, and only the chosen app's are used).
(function () {
  "use strict";
  var form = document.getElementById("start-form");
  if (!form) return;
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
    form.querySelectorAll(".app-logdir").forEach(function (l) {
      l.hidden = l.dataset.apps.split(" ").indexOf(app) < 0;
    });
  }
  form.addEventListener("change", function (e) {
    if (e.target && e.target.name === "kind") update();
  });
  update();
})();
