// Tables read as cards on a narrow screen: below 600 px (frontend/atrium.css) each
// row of a `.table-wrap` table is a stacked card, each cell led by its column's
// name, which this script copies from the table's header into the cell's
// `data-label` (rows drawn later, by a live refresh, too).
(function () {
  "use strict";
  function label(root) {
    Array.prototype.forEach.call((root || document).querySelectorAll(".table-wrap > table"), function (table) {
      var heads = table.tHead ? table.tHead.rows[0] : null;
      if (!heads) return;
      var names = Array.prototype.map.call(heads.cells, function (c) { return c.textContent.trim(); });
      Array.prototype.forEach.call(table.tBodies, function (body) {
        Array.prototype.forEach.call(body.rows, function (row) {
          var at = 0;
          Array.prototype.forEach.call(row.cells, function (cell) {
            if (!cell.hasAttribute("data-label") && names[at]) cell.setAttribute("data-label", names[at]);
            at += cell.colSpan || 1;
          });
        });
      });
    });
  }
  label(document);
  if (window.MutationObserver) {
    new MutationObserver(function (changes) {
      for (var i = 0; i < changes.length; i++) {
        if (changes[i].addedNodes.length) { label(document); return; }
      }
    }).observe(document.body, { childList: true, subtree: true });
  }
})();
