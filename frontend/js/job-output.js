// The live tail on a job's page. The server renders the last part of the output
// and where it stopped (data-offset); this follows the file from there through
// GET /api/v1/jobs/{id}/output?follow=true (server-sent events: one `data:` per
// line, an `end` event once the job is over) and then says "finished".
// A pending job has no output file yet: its state is polled until it starts.
(function () {
  "use strict";
  var pre = document.getElementById("job-output");
  var status = document.getElementById("output-status");
  if (!pre || pre.dataset.follow !== "true" || !window.EventSource) return;

  var job = encodeURIComponent(pre.dataset.job);
  var offset = Number(pre.dataset.offset) || 0;
  var encoder = new TextEncoder();
  var failures = 0;

  function say(text) {
    if (status) status.textContent = text;
  }

  function isActive(state) {
    return state === "PENDING" || state === "RUNNING" || state === "COMPLETING";
  }

  function append(line) {
    var atBottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.appendChild(document.createTextNode(line + "\n"));
    if (atBottom) pre.scrollTop = pre.scrollHeight;
  }

  function jobInfo() {
    return fetch("/api/v1/jobs/" + job, {
      credentials: "same-origin",
      headers: { Accept: "application/json" },
    }).then(function (r) {
      return r.ok ? r.json() : null;
    });
  }

  // Bring the facts above the output up to date (state, exit code, cancel button).
  function refresh(info) {
    if (!info) return;
    var state = document.getElementById("job-state");
    if (state) {
      state.textContent = info.state;
      state.className = "state state-" + info.state;
    }
    var reason = document.getElementById("job-reason");
    if (reason && !info.reason) reason.remove();
    var exit = document.getElementById("job-exit-code");
    if (exit) {
      if (info.exit_code !== null && info.exit_code !== undefined) exit.textContent = String(info.exit_code);
      else if (info.signal !== null && info.signal !== undefined) exit.textContent = "signal " + info.signal;
    }
    var cancel = document.getElementById("cancel-form");
    if (cancel && !isActive(info.state)) cancel.remove();
  }

  function finished() {
    say("finished");
    jobInfo().then(refresh, function () {});
  }

  function follow() {
    say("live");
    var source = new EventSource("/api/v1/jobs/" + job + "/output?follow=true&offset=" + offset);
    source.onmessage = function (event) {
      append(event.data);
      offset += encoder.encode(event.data).length + 1;
      failures = 0;
    };
    source.addEventListener("end", function () {
      source.close();
      finished();
    });
    source.onerror = function () {
      // Reconnect from where we are rather than letting the browser start over.
      source.close();
      if (++failures <= 5) {
        say("reconnecting…");
        setTimeout(follow, 2000 * failures);
      } else {
        say("The live output stopped; reload the page to see the rest.");
      }
    };
  }

  function waitForStart() {
    say("Waiting for the job to start…");
    jobInfo().then(
      function (info) {
        if (info && info.stdout) {
          refresh(info);
          follow();
        } else if (info && !isActive(info.state)) {
          refresh(info);
          say("finished");
        } else {
          setTimeout(waitForStart, 1000);
        }
      },
      function () {
        setTimeout(waitForStart, 5000);
      }
    );
  }

  if (document.getElementById("job-stdout")) follow();
  else waitForStart();
})();
