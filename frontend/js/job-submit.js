// The submission form: choosing a starter fills the script box in place.
// Without JavaScript the "Load" button reloads the form with ?starter=NAME.
(function () {
  "use strict";
  var form = document.getElementById("starter-form");
  var select = document.getElementById("starter");
  var script = document.getElementById("script");
  if (!form || !select || !script) return;

  function load() {
    if (!select.value) return; // "your own script": keep what is there
    var starter = document.getElementById("starter-" + select.value);
    if (starter) script.value = starter.content.textContent;
  }

  select.addEventListener("change", load);
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    load();
  });
  var button = document.getElementById("starter-load");
  if (button) button.hidden = true;
})();
