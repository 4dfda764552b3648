(function () {
  "use strict";

  function sortKey(row, col, type) {
    var cell = row.cells[col];
    if (!cell) return type === "num" ? -Infinity : "";
    var raw = cell.getAttribute("data-sort");
    if (type === "num") {
      var value = parseFloat(raw);
      return isNaN(value) ? -Infinity : value;
    }
    return (raw !== null ? raw : cell.textContent || "").toLowerCase();
  }

  function sortTable(table, th) {
    var type = th.getAttribute("data-type") || "text";
    var col = th.cellIndex;
    var ascending = th.getAttribute("aria-sort") !== "ascending";
    var headers = table.querySelectorAll("thead th");
    for (var i = 0; i < headers.length; i++) headers[i].removeAttribute("aria-sort");
    th.setAttribute("aria-sort", ascending ? "ascending" : "descending");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows).map(function (row, index) {
      return { row: row, key: sortKey(row, col, type), index: index };
    });
    rows.sort(function (a, b) {
      var order = a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
      if (!ascending) order = -order;
      return order || a.index - b.index;
    });
    var fragment = document.createDocumentFragment();
    rows.forEach(function (entry) { fragment.appendChild(entry.row); });
    body.appendChild(fragment);
  }

  function applyFilter(card) {
    var input = card.querySelector("input[data-role='search']");
    var toggle = card.querySelector("input[data-role='failed-only']");
    var status = card.querySelector("[data-role='shown']");
    var table = card.querySelector("table.item-table");
    if (!table) return;
    var needle = input ? input.value.trim().toLowerCase() : "";
    var failedOnly = toggle ? toggle.checked : false;
    var rows = table.tBodies[0].rows;
    var shown = 0;
    for (var i = 0; i < rows.length; i++) {
      var row = rows[i];
      var visible = (!failedOnly || row.classList.contains("failed")) &&
        (!needle || (row.textContent || "").toLowerCase().indexOf(needle) !== -1);
      row.hidden = !visible;
      if (visible) shown++;
    }
    if (status) status.textContent = shown.toLocaleString("en-US") + " of " +
      rows.length.toLocaleString("en-US") + " rows";
  }

  document.querySelectorAll("table.sortable").forEach(function (table) {
    table.querySelectorAll("thead th[data-type]").forEach(function (th) {
      var button = th.querySelector("button");
      if (button) button.addEventListener("click", function () { sortTable(table, th); });
    });
  });

  document.querySelectorAll("[data-role='items']").forEach(function (card) {
    card.querySelectorAll("input[data-role]").forEach(function (input) {
      input.addEventListener("input", function () { applyFilter(card); });
      input.addEventListener("change", function () { applyFilter(card); });
    });
    applyFilter(card);
  });

  var data = document.getElementById("contextlens-data");
  if (data) {
    try {
      var parsed = JSON.parse(data.textContent || "{}");
      document.documentElement.setAttribute(
        "data-metrics", String(Object.keys(parsed.summaries || {}).length));
    } catch (err) {
      document.documentElement.setAttribute("data-metrics", "error");
    }
  }
  document.documentElement.setAttribute("data-ready", "1");
})();
