// The submission form.
// - Choosing a starter fills the script box in place (without JavaScript the
//   "Load" button reloads the form with ?starter=NAME).
// - The GPU and time fields write the script's `#SBATCH --gres=…` and
//   `#SBATCH --time=…` lines, and follow the script when it is edited by hand.
// - After a refusal, the numbered view beside the script keeps its refused lines
//   marked while the script is edited.
(function () {
  "use strict";
  var script = document.getElementById("script");
  if (!script) return;

  // ---- Starters ----
  var form = document.getElementById("starter-form");
  var select = document.getElementById("starter");
  function load() {
    if (!select || !select.value) return; // "your own script": keep what is there
    var starter = document.getElementById("starter-" + select.value);
    if (starter) {
      script.value = starter.content.textContent;
      readFields();
      renderLines();
    }
  }
  if (form && select) {
    select.addEventListener("change", load);
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      load();
    });
    var button = document.getElementById("starter-load");
    if (button) button.hidden = true;
  }

  // ---- Directives ----
  var GPU_RE = /^#SBATCH\s+(?:--gres(?:=|\s+)(?:gres[:/])?gpu(?::(?!\d+(?:[\s,]|$))([^\s:,]+))?(?::(\d+))?|--gpus(?:=|\s+)(?:([^\s:,]+):)?(\d+)|-G\s*(\d+))(\s.*)?$/;
  var TIME_RE = /^#SBATCH\s+(?:--time(?:=|\s+)|-t\s*)(\S+)(\s.*)?$/;

  function lines() { return script.value.split("\n"); }

  // The index just past the directive header: after the `#!` line and the
  // comment lines, where `sbatch` stops reading `#SBATCH`.
  function headerEnd(ls) {
    var end = 0, lastDirective = -1;
    for (var i = 0; i < ls.length; i++) {
      var t = ls[i].trim();
      if (t === "" || t.charAt(0) === "#") {
        if (/^#SBATCH\s/.test(t)) lastDirective = i;
        end = i + 1;
        continue;
      }
      break;
    }
    if (lastDirective >= 0) return lastDirective + 1;
    return ls.length > 0 && ls[0].indexOf("#!") === 0 ? 1 : 0;
  }

  function findLine(ls, re) {
    var end = headerEnd(ls);
    for (var i = 0; i < end; i++) if (re.test(ls[i].trim())) return i;
    return -1;
  }

  // Put `text` in place of the line `re` matches, after the header's
  // directives when there is none, or take the line out when `text` is empty.
  function setLine(re, text) {
    var ls = lines();
    var at = findLine(ls, re);
    if (at >= 0) {
      if (text) ls[at] = text; else ls.splice(at, 1);
    } else if (text) {
      if (ls.length === 1 && ls[0] === "") ls = ["#!/bin/bash"];
      ls.splice(headerEnd(ls), 0, text);
    }
    script.value = ls.join("\n");
    renderLines();
  }

  var gpus = document.getElementById("field-gpus");
  var gpuType = document.getElementById("field-gpu-type");
  var time = document.getElementById("field-time");
  var note = document.getElementById("field-note");
  var fields = document.getElementById("job-fields");

  function writeGpus() {
    var n = parseInt(gpus.value, 10);
    if (isNaN(n) || n < 0) n = 0;
    var type = gpuType ? gpuType.value : "";
    var text = n > 0 ? "#SBATCH --gres=gpu:" + (type ? type + ":" : "") + n : "";
    setLine(GPU_RE, text);
    if (note) note.textContent = n === 0 ? "No GPU asked." : n + (n === 1 ? " GPU" : " GPUs") + (type ? " of type " + type : "") + " per node.";
  }

  function writeTime() {
    var v = time.value.trim();
    if (v && !/^[0-9:\-]+$/.test(v) && v.toUpperCase() !== "UNLIMITED" && v.toUpperCase() !== "INFINITE") {
      if (note) note.textContent = "A time limit looks like 90 (minutes), 1:30:00 or 2-00:00:00.";
      time.setAttribute("aria-invalid", "true");
      return;
    }
    time.removeAttribute("aria-invalid");
    setLine(TIME_RE, v ? "#SBATCH --time=" + v : "");
  }

  // The fields from the script's directives (when the script is edited by hand).
  function readFields() {
    if (!gpus) return;
    var ls = lines();
    var g = findLine(ls, GPU_RE);
    if (document.activeElement !== gpus && document.activeElement !== gpuType) {
      if (g >= 0) {
        var m = ls[g].trim().match(GPU_RE);
        var type = m[1] || m[3] || "";
        var count = m[2] || m[4] || m[5] || "1";
        gpus.value = count;
        if (gpuType) {
          var known = Array.prototype.some.call(gpuType.options, function (o) { return o.value === type; });
          if (type && !known) {
            var o = document.createElement("option");
            o.value = o.textContent = type;
            gpuType.appendChild(o);
          }
          gpuType.value = type;
        }
      } else {
        gpus.value = "0";
        if (gpuType) gpuType.value = "";
      }
    }
    if (time && document.activeElement !== time) {
      var t = findLine(ls, TIME_RE);
      time.value = t >= 0 ? ls[t].trim().match(TIME_RE)[1] : "";
    }
  }

  // ---- The numbered view with the refused lines ----
  var view = document.getElementById("script-lines");
  var bad = (script.getAttribute("data-bad-lines") || "").split(",").filter(Boolean).map(Number);
  function renderLines() {
    if (!view || view.hidden) return;
    var ls = lines();
    while (view.firstChild) view.removeChild(view.firstChild);
    for (var i = 0; i < ls.length; i++) {
      var li = document.createElement("li");
      li.id = "script-line-" + (i + 1);
      if (bad.indexOf(i + 1) >= 0) {
        li.className = "bad";
        li.setAttribute("aria-invalid", "true");
      }
      var code = document.createElement("code");
      code.textContent = ls[i];
      li.appendChild(code);
      view.appendChild(li);
    }
  }

  if (fields && gpus && time) {
    fields.hidden = false;
    gpus.addEventListener("input", writeGpus);
    if (gpuType) gpuType.addEventListener("change", writeGpus);
    time.addEventListener("input", writeTime);
    readFields();
  }
  script.addEventListener("input", function () {
    readFields();
    renderLines();
  });
})();
