/* The comparison's changes by case: regressions first, a page at a time. */
(function () {
  "use strict";
  var el = CL.el;
  var data = CL.json("cl-changes");
  var root = document.getElementById("changes");
  if (!data || !root) return;
  var q = function (role) { return root.querySelector("[data-role='" + role + "']"); };
  var search = q("change-search"), metric = q("change-metric"), changedOnly = q("changed-only");
  var TONE = { "newly failed": "bad", regressed: "bad", improved: "good", fixed: "good" };
  var rows = data.rows.map(function (r) {
    return { metric: r[0], id: r[1], a: r[2], b: r[3], diff: r[4], change: r[5], regression: r[6] };
  });

  function render(row) {
    var tone = row.diff === null || row.diff === undefined ? "" : row.diff < 0 ? "neg" : row.diff > 0 ? "pos" : "";
    return el("tr", { "data-change": row.change, "data-case": row.id,
                      "data-regression": row.regression ? "true" : "false" }, [
      el("td", { className: "case", text: row.id }),
      el("td", { text: data.metrics[row.metric] }),
      el("td", { className: "num", text: row.a === null ? (row.change === "only in B" ? "absent" : "failed") : CL.score(row.a) }),
      el("td", { className: "num", text: row.b === null ? (row.change === "only in A" ? "absent" : "failed") : CL.score(row.b) }),
      el("td", { className: "num diff " + tone, text: CL.diff(row.diff) }),
      el("td", {}, [el("span", { className: "pill " + (TONE[row.change] || ""), text: row.change })])
    ]);
  }

  var pager = new CL.Pager({ body: q("change-rows"), render: render, size: 100,
    status: q("change-count"), pageLabel: q("page"), prev: q("prev"), next: q("next") });

  function refresh() {
    var needle = search.value.trim().toLowerCase();
    var at = metric.value === "" ? null : parseInt(metric.value, 10);
    pager.show(rows.filter(function (row) {
      if (at !== null && row.metric !== at) return false;
      if (changedOnly.checked && row.change === "unchanged") return false;
      return !needle || row.id.toLowerCase().indexOf(needle) !== -1;
    }), rows.length);
  }
  [search, metric, changedOnly].forEach(function (input) {
    input.addEventListener("input", refresh);
    input.addEventListener("change", refresh);
  });
  refresh();
})();
