// The Files page: upload (in pieces, with a progress bar per file, continuing from
// what the portal holds after an interruption), new folder, rename and delete, all
// through /api/v1/files with the session's CSRF token. The folder itself is drawn by
// the server; after a change the page is loaded again, after an upload its table.
(function () {
  "use strict";
  var root = document.getElementById("files");
  if (!root) return;
  var api = "/api/v1/files";
  var dir = root.getAttribute("data-dir");
  var csrf = root.getAttribute("data-csrf");
  var chunk = parseInt(root.getAttribute("data-chunk"), 10) || 16 * 1024 * 1024;
  var errorBox = document.getElementById("files-action-error");

  function join(name) {
    return dir.replace(/\/+$/, "") + "/" + name;
  }

  function showError(text) {
    errorBox.textContent = text;
    errorBox.hidden = false;
  }

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  // A JSON call; rejects with the portal's message.
  function call(method, url, body) {
    var init = { method: method, headers: { "X-CSRF-Token": csrf }, credentials: "same-origin" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    return fetch(url, init).then(function (res) {
      return res.json().catch(function () { return {}; }).then(function (answer) {
        if (!res.ok) throw new Error(answer.message || ("the portal answered " + res.status));
        return answer;
      });
    });
  }

  // A name for a new folder or a rename: one path component.
  function checkedName(name) {
    if (name === null) return null;
    name = name.trim();
    if (!name) return null;
    if (name.indexOf("/") >= 0 || name === "." || name === "..") {
      showError("A name cannot contain '/' or be '.' or '..'.");
      return null;
    }
    return name;
  }

  var mkdir = document.getElementById("files-mkdir");
  if (mkdir) {
    mkdir.addEventListener("click", function () {
      var name = checkedName(window.prompt("Name of the new folder"));
      if (!name) return;
      call("POST", api + "/mkdir", { path: join(name) })
        .then(function () { window.location.reload(); })
        .catch(function (e) { showError(e.message); });
    });
  }

  function bindRow(row) {
    var path = row.getAttribute("data-path");
    var name = row.getAttribute("data-name");
    var isDir = row.getAttribute("data-kind") === "dir";
    var rename = row.querySelector(".files-rename");
    if (rename) {
      rename.setAttribute("aria-label", "Rename " + name);
      rename.addEventListener("click", function () {
        var to = checkedName(window.prompt("New name for " + name, name));
        if (!to || to === name) return;
        call("POST", api + "/rename", { from: path, to: join(to) })
          .then(function () { window.location.reload(); })
          .catch(function (e) { showError(e.message); });
      });
    }
    var del = row.querySelector(".files-delete");
    if (del) {
      del.setAttribute("aria-label", "Delete " + name);
      del.addEventListener("click", function () {
        var what = isDir ? "the folder " + name + " and everything in it" : name;
        if (!window.confirm("Delete " + what + "? This cannot be undone.")) return;
        var url = api + "?path=" + encodeURIComponent(path) + (isDir ? "&recursive=true" : "");
        call("DELETE", url)
          .then(function () { window.location.reload(); })
          .catch(function (e) { showError(e.message); });
      });
    }
  }
  Array.prototype.forEach.call(root.querySelectorAll("tr[data-path]"), bindRow);

  // The folder's table drawn again by the server, in place (after an upload: the
  // upload's progress stays on the page).
  function refreshTable() {
    return fetch(window.location.href, { credentials: "same-origin" })
      .then(function (res) { if (!res.ok) throw new Error("HTTP " + res.status); return res.text(); })
      .then(function (html) {
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("files-table");
        var table = document.getElementById("files-table");
        if (!fresh || !table) return;
        table.replaceWith(document.importNode(fresh, true));
        Array.prototype.forEach.call(document.querySelectorAll("#files-table tr[data-path]"), bindRow);
      });
  }

  // --- Uploads ---------------------------------------------------------------------

  function status(path) {
    return call("GET", api + "/upload?path=" + encodeURIComponent(path));
  }

  // PUT one piece; resolves with the portal's new offset. `progress(n)`: bytes sent.
  function putPiece(path, offset, blob, progress) {
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      xhr.open("PUT", api + "/upload?path=" + encodeURIComponent(path) + "&offset=" + offset);
      xhr.setRequestHeader("X-CSRF-Token", csrf);
      xhr.setRequestHeader("Content-Type", "application/octet-stream");
      xhr.upload.onprogress = function (e) { progress(e.loaded); };
      xhr.onload = function () {
        var answer = {};
        try { answer = JSON.parse(xhr.responseText); } catch (e) { /* not JSON */ }
        if (xhr.status === 200) resolve(answer.offset);
        else {
          var err = new Error(answer.message || ("the portal answered " + xhr.status));
          err.retry = xhr.status >= 500 || xhr.status === 409;
          reject(err);
        }
      };
      xhr.onerror = xhr.onabort = xhr.ontimeout = function () {
        var err = new Error("the connection was lost");
        err.retry = true;
        reject(err);
      };
      xhr.send(blob);
    });
  }

  function uploadRow(file) {
    var li = document.createElement("li");
    li.className = "files-upload";
    li.setAttribute("data-name", file.name);
    li.setAttribute("data-state", "waiting");
    var label = document.createElement("span");
    label.className = "files-upload-name";
    label.textContent = file.name;
    var bar = document.createElement("progress");
    bar.max = file.size || 1;
    bar.value = 0;
    bar.setAttribute("aria-label", "Upload of " + file.name);
    var note = document.createElement("span");
    note.className = "files-upload-note muted";
    note.textContent = "waiting";
    li.appendChild(label);
    li.appendChild(bar);
    li.appendChild(note);
    document.getElementById("files-uploads").appendChild(li);
    return { li: li, bar: bar, note: note };
  }

  async function uploadOne(file, row) {
    var target = join(file.name);
    var st = await status(target);
    if (st.exists && !window.confirm(file.name + " exists in this folder. Replace it?")) {
      row.li.setAttribute("data-state", "skipped");
      row.note.textContent = "not uploaded (kept the file that was there)";
      return;
    }
    if (file.size > st.max_file_bytes) {
      throw new Error("larger than the largest file accepted");
    }
    var size = Math.min(chunk, st.max_chunk_bytes || chunk);
    var offset = st.offset <= file.size ? st.offset : 0;
    if (offset > 0) row.note.textContent = "continuing from " + Math.round(100 * offset / file.size) + "%";
    row.li.setAttribute("data-state", "sending");
    var failures = 0;
    do {
      var end = Math.min(file.size, offset + size);
      var start = offset;
      try {
        offset = await putPiece(target, start, file.slice(start, end), function (n) {
          row.bar.value = start + n;
          row.note.textContent = Math.floor(100 * (start + n) / (file.size || 1)) + "%";
        });
        failures = 0;
      } catch (e) {
        if (!e.retry || ++failures > 5) throw e;
        row.note.textContent = e.message + "; trying again";
        await sleep(1000 * failures);
        offset = (await status(target)).offset;
      }
      row.bar.value = offset;
    } while (offset < file.size);
    await call("POST", api + "/upload/complete", { path: target, size: file.size, overwrite: st.exists });
    row.bar.value = row.bar.max;
    row.li.setAttribute("data-state", "done");
    row.note.textContent = "uploaded";
  }

  var input = document.getElementById("files-upload");
  if (input) {
    input.addEventListener("change", async function () {
      var files = Array.prototype.slice.call(input.files);
      var rows = files.map(uploadRow);
      var done = 0;
      for (var i = 0; i < files.length; i++) {
        try {
          await uploadOne(files[i], rows[i]);
          if (rows[i].li.getAttribute("data-state") === "done") done++;
        } catch (e) {
          rows[i].li.setAttribute("data-state", "failed");
          rows[i].note.textContent = "failed: " + e.message + " (choose the file again to continue)";
        }
      }
      input.value = "";
      if (done > 0) {
        refreshTable().catch(function () {
          showError("The upload is done; reload the page to see the folder as it is now.");
        });
      }
    });
  }
})();
