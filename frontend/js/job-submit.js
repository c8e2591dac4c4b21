// The submission form.
// - Choosing a starter fills the script box in place (without JavaScript the
//   "Load" button reloads the form with ?starter=NAME).
// - The fields (name, partition, GPUs, CPUs, memory, time) write the script's
//   `#SBATCH` lines, and follow the script when it is edited by hand.
// - A field's value is written only once it is whole and means what it says:
//   `2h` is two hours (`--time=2:00:00`), never the `2` typed on the way; a value
//   that means nothing is an error beside its field, and Submit waits until every
//   field's error is gone (all of them shown at once).
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

  // ---- Values as people write them ----

  // A duration: Slurm's forms (`90` minutes, `1:30:00`, `2-12`, `UNLIMITED`) or
  // words (`2h`, `2 hours`, `1.5h`, `1d 12h`, `90 min`). Returns {secs, slurm} with
  // secs 0 for unlimited, or {error}.
  var UNITS = { s: 1, sec: 1, secs: 1, second: 1, seconds: 1,
    m: 60, min: 60, mins: 60, minute: 60, minutes: 60,
    h: 3600, hr: 3600, hrs: 3600, hour: 3600, hours: 3600,
    d: 86400, day: 86400, days: 86400, w: 604800, week: 604800, weeks: 604800 };
  var DURATION_HELP = "Write a time like 2h, 90m, 1d 12h or 1:30:00.";
  function parseDuration(text) {
    var t = text.trim().toLowerCase();
    if (t === "unlimited" || t === "infinite") return { secs: 0, slurm: "UNLIMITED" };
    var m, secs;
    if ((m = t.match(/^(\d{1,6})-(\d{1,2})(?::(\d{1,2}))?(?::(\d{1,2}))?$/))) {
      var h = +m[2], mi = +(m[3] || 0), s = +(m[4] || 0);
      if (h >= 24 || mi >= 60 || s >= 60) return { error: "Hours must be under 24 and minutes and seconds under 60 (days-hours:minutes:seconds)." };
      secs = +m[1] * 86400 + h * 3600 + mi * 60 + s;
    } else if ((m = t.match(/^(\d{1,7})(?::(\d{1,2}))?(?::(\d{1,2}))?$/))) {
      if (m[3] !== undefined) {
        if (+m[2] >= 60 || +m[3] >= 60) return { error: "Minutes and seconds must be under 60 (hours:minutes:seconds)." };
        secs = +m[1] * 3600 + +m[2] * 60 + +m[3];
      } else if (m[2] !== undefined) {
        if (+m[2] >= 60) return { error: "Seconds must be under 60 (minutes:seconds)." };
        secs = +m[1] * 60 + +m[2];
      } else {
        secs = +m[1] * 60; // Slurm: a bare number is minutes
      }
    } else {
      var re = /(\d+(?:\.\d+)?|\.\d+)\s*([a-z]+)\s*(?:,|and)?\s*/g, at = 0;
      secs = 0;
      while ((m = re.exec(t)) && m.index === at) {
        var unit = UNITS[m[2]];
        if (!unit) return { error: "\u201c" + m[2] + "\u201d is not a unit of time. " + DURATION_HELP };
        secs += parseFloat(m[1]) * unit;
        at = re.lastIndex;
      }
      if (at === 0 || at !== t.length) return { error: DURATION_HELP };
      secs = Math.round(secs);
    }
    if (secs <= 0) return { error: "A time limit must be more than 0. For no limit, leave it empty." };
    if (secs > 365 * 86400) return { error: "At most a year." };
    return { secs: secs, slurm: slurmDuration(secs) };
  }
  function pad(n) { return n < 10 ? "0" + n : "" + n; }
  function slurmDuration(secs) {
    var d = Math.floor(secs / 86400), h = Math.floor(secs / 3600) % 24,
        m = Math.floor(secs / 60) % 60, s = secs % 60;
    return (d > 0 ? d + "-" + pad(h) : "" + h) + ":" + pad(m) + ":" + pad(s);
  }
  function inWords(secs) {
    var parts = [], d = Math.floor(secs / 86400), h = Math.floor(secs / 3600) % 24,
        m = Math.floor(secs / 60) % 60, s = secs % 60;
    if (d) parts.push(d + (d === 1 ? " day" : " days"));
    if (h) parts.push(h + (h === 1 ? " hour" : " hours"));
    if (m) parts.push(m + (m === 1 ? " minute" : " minutes"));
    if (s) parts.push(s + (s === 1 ? " second" : " seconds"));
    return parts.join(" ");
  }

  // Memory: `16` (GiB), `16G`, `16 GB`, `512M`, `1.5T`. Returns {text} for
  // `--mem=`, or {error}.
  function parseMemory(text) {
    var m = text.trim().toUpperCase().match(/^(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?$/);
    if (!m) return { error: "Write memory like 16G, 512M or 1.5T (a number alone is GiB)." };
    var n = parseFloat(m[1]), unit = m[2] || "G";
    var mb = n * { K: 1 / 1024, M: 1, G: 1024, T: 1048576 }[unit];
    if (mb < 1) return { error: "At least 1M of memory." };
    if (n !== Math.floor(n)) return { text: Math.ceil(mb) + "M" };
    return { text: n + unit };
  }

  // ---- Directives ----
  var GPU_RE = /^#SBATCH\s+(?:--gres(?:=|\s+)(?:gres[:/])?gpu(?::(?!\d+(?:[\s,]|$))([^\s:,]+))?(?::(\d+))?|--gpus(?:=|\s+)(?:([^\s:,]+):)?(\d+)|-G\s*(\d+))(\s.*)?$/;
  var TIME_RE = /^#SBATCH\s+(?:--time(?:=|\s+)|-t\s*)(\S+)(\s.*)?$/;
  var NAME_RE = /^#SBATCH\s+(?:--job-name(?:=|\s+)|-J\s*)(\S+)(\s.*)?$/;
  var PARTITION_RE = /^#SBATCH\s+(?:--partition(?:=|\s+)|-p\s*)(\S+)(\s.*)?$/;
  var CPUS_RE = /^#SBATCH\s+(?:--cpus-per-task(?:=|\s+)|-c\s*)(\S+)(\s.*)?$/;
  var MEM_RE = /^#SBATCH\s+--mem(?:=|\s+)(\S+)(\s.*)?$/;

  function lines() { return script.value.split("\n"); }

  // The index just past the directive header: after the `#!` line and the
  // comment lines, where `sbatch` stops reading `#SBATCH`.
  function headerEnd(ls) {
    var lastDirective = -1;
    for (var i = 0; i < ls.length; i++) {
      var t = ls[i].trim();
      if (t === "" || t.charAt(0) === "#") {
        if (/^#SBATCH\s/.test(t)) lastDirective = i;
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

  function el(id) { return document.getElementById(id); }
  var fields = el("job-fields");
  var gpus = el("field-gpus"), gpuType = el("field-gpu-type"), time = el("field-time");
  var name = el("field-name"), partition = el("field-partition");
  var cpus = el("field-cpus"), mem = el("field-mem");
  var summary = el("fields-error");

  // A field's error beside it (or none), and the summary above Submit.
  function showError(input, message) {
    var box = el(input.id + "-error");
    if (message) input.setAttribute("aria-invalid", "true");
    else input.removeAttribute("aria-invalid");
    if (box) {
      box.textContent = message || "";
      box.hidden = !message;
    }
    if (summary && !summary.hidden) updateSummary();
  }
  function invalidFields() {
    return [name, gpus, cpus, mem, time].filter(function (f) {
      return f && f.getAttribute("aria-invalid") === "true";
    });
  }
  function updateSummary() {
    var bad = invalidFields();
    summary.hidden = bad.length === 0;
    summary.textContent = bad.length === 0 ? "" : (bad.length === 1
      ? "One field needs fixing; it is marked."
      : bad.length + " fields need fixing; they are marked.");
  }

  // The partition chosen (its option, whose data carry its limits).
  function chosenPartition() {
    return partition && partition.selectedIndex >= 0 ? partition.options[partition.selectedIndex] : null;
  }

  function setHint(id, text) { var h = el(id); if (h) h.textContent = text; }

  function describePartition() {
    var p = chosenPartition();
    if (!p || !p.dataset.name) return;
    var d = p.dataset;
    setHint("field-partition-hint", (d.max ? "Time limit at most " + d.max : "No time limit") +
      (d.defaultTime ? "; " + d.defaultTime + " when none is given." : "."));
    setHint("field-cpus-hint", +d.cpus ? "Without a value: " + d.cpus + " per GPU." : "");
    setHint("field-mem-hint", +d.mem ? "Without a value: " + d.mem + " GiB per GPU." : "A number alone is GiB.");
    if (time && time.value.trim()) checkTime(false);
  }

  function writeName() {
    var v = name.value.trim();
    if (/\s/.test(v)) { showError(name, "A job name has no spaces (use - or _)."); return; }
    showError(name, "");
    setLine(NAME_RE, v ? "#SBATCH --job-name=" + v : "");
  }

  function writePartition() {
    setLine(PARTITION_RE, partition.value ? "#SBATCH --partition=" + partition.value : "");
    describePartition();
  }

  function wholeNumber(input, min, what) {
    var v = input.value.trim();
    if (v === "") return { empty: true };
    if (!/^\d+$/.test(v) || +v < min) return { error: what };
    return { n: +v };
  }

  function writeGpus() {
    var got = wholeNumber(gpus, 0, "Write how many GPUs as a whole number, 0 or more.");
    if (got.error) { showError(gpus, got.error); return; }
    showError(gpus, "");
    var n = got.n || 0;
    var type = gpuType ? gpuType.value : "";
    setLine(GPU_RE, n > 0 ? "#SBATCH --gres=gpu:" + (type ? type + ":" : "") + n : "");
    setHint("field-gpus-hint", n === 0 ? "No GPU asked." : n + (n === 1 ? " GPU" : " GPUs") + (type ? " of type " + type : "") + " per node.");
  }

  function writeCpus() {
    var got = wholeNumber(cpus, 1, "Write how many CPUs as a whole number, 1 or more.");
    if (got.error) { showError(cpus, got.error); return; }
    showError(cpus, "");
    setLine(CPUS_RE, got.empty ? "" : "#SBATCH --cpus-per-task=" + got.n);
  }

  function writeMem() {
    var v = mem.value.trim();
    if (!v) { showError(mem, ""); setLine(MEM_RE, ""); return; }
    var got = parseMemory(v);
    if (got.error) { showError(mem, got.error); return; }
    showError(mem, "");
    setLine(MEM_RE, "#SBATCH --mem=" + got.text);
  }

  // Check the time field; with `write`, put its line in the script once whole.
  function checkTime(write) {
    var v = time.value.trim();
    if (!v) {
      showError(time, "");
      setHint("field-time-hint", "");
      if (write) setLine(TIME_RE, "");
      return;
    }
    var got = parseDuration(v);
    var p = chosenPartition();
    var max = p ? +p.dataset.maxSecs : 0;
    if (!got.error && max > 0 && (got.secs === 0 || got.secs > max)) {
      got = { error: "At most " + p.dataset.max + " in partition " + p.dataset.name + "." };
    }
    if (got.error) {
      showError(time, got.error);
      setHint("field-time-hint", "");
      return;
    }
    showError(time, "");
    setHint("field-time-hint", got.secs === 0 ? "No time limit." : "= " + inWords(got.secs) +
      (/^\d+$/.test(v) ? " (a number alone is minutes; for hours write " + v + "h)" : ""));
    if (write) setLine(TIME_RE, "#SBATCH --time=" + got.slurm);
  }
  function writeTime() { checkTime(true); }

  // The fields from the script's directives (when the script is edited by hand).
  // The script is then the truth: a field's own error goes, and what the
  // directives say is for the submission to judge.
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
      showError(gpus, "");
    }
    function follow(input, re) {
      if (!input || document.activeElement === input) return;
      var at = findLine(ls, re);
      input.value = at >= 0 ? ls[at].trim().match(re)[1] : "";
      showError(input, "");
    }
    follow(time, TIME_RE);
    follow(name, NAME_RE);
    follow(cpus, CPUS_RE);
    follow(mem, MEM_RE);
    if (mem && /^\d+$/.test(mem.value)) mem.value += "M"; // Slurm's unit; the field's is GiB
    if (time && time.value && document.activeElement !== time) {
      var t = parseDuration(time.value);
      setHint("field-time-hint", t.error ? "" : t.secs === 0 ? "No time limit." : "= " + inWords(t.secs));
    }
    if (partition && document.activeElement !== partition) {
      var at = findLine(ls, PARTITION_RE);
      var want = at >= 0 ? ls[at].trim().match(PARTITION_RE)[1] : "";
      var found = Array.prototype.find.call(partition.options, function (o) {
        return o.dataset.name === want || o.value === want;
      });
      if (found) partition.value = found.value;
      describePartition();
    }
  }

  // ---- The numbered view with the refused lines ----
  var view = el("script-lines");
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
    if (name) name.addEventListener("input", writeName);
    if (partition) partition.addEventListener("change", writePartition);
    if (cpus) cpus.addEventListener("input", writeCpus);
    if (mem) mem.addEventListener("input", writeMem);
    readFields();
    // Submit waits while a field holds a value that means nothing: every such
    // field keeps its error, the first takes the focus.
    var jobForm = el("job-form");
    if (jobForm) {
      jobForm.addEventListener("submit", function (event) {
        var badFields = invalidFields();
        if (badFields.length === 0) return;
        event.preventDefault();
        updateSummary();
        badFields[0].focus();
      });
    }
  }
  script.addEventListener("input", function () {
    readFields();
    renderLines();
  });
})();
