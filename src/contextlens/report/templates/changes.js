/* The changes by case of a comparison (or of a trend's first and last run): regressions
   first, a page at a time, each case linked to its page in each run's report; a case opens
   A and B side by side (#case=ID&metric=NAME): its scores per metric, then A's and B's
   texts, chunks and evidence (casedetail.js). Every text goes in through textContent. */
(function () {
  "use strict";
  var el = CL.el;
  var data = CL.json("cl-changes");
  var root = document.getElementById("changes");
  if (!data || !root) return;
  var D = CL.detail;
  var q = function (role) { return root.querySelector("[data-role='" + role + "']"); };
  var search = q("change-search"), metric = q("change-metric"), changedOnly = q("changed-only");
  var TONE = { "newly failed": "bad", regressed: "bad", improved: "good", fixed: "good" };
  var sides = data.sides || { a: "A", b: "B" };
  var reports = data.reports || {};
  var rows = data.rows.map(function (r, index) {
    return { index: index, metric: r[0], id: r[1], a: r[2], b: r[3], diff: r[4], change: r[5],
             regression: r[6], noise: r[7], view: r[8] === undefined ? -1 : r[8] };
  });
  var byCase = {};
  rows.forEach(function (row) { (byCase[row.id] = byCase[row.id] || []).push(row); });

  function changeText(row) {
    return row.noise ? "unchanged (within noise)" : row.change;
  }

  function scoreText(row, side) {
    var value = side === "a" ? row.a : row.b;
    if (value !== null && value !== undefined) return CL.score(value);
    return row.change === (side === "a" ? "only in B" : "only in A") ? "absent" : "failed";
  }

  function inRun(row, side) {
    return row.change !== (side === "a" ? "only in B" : "only in A");
  }

  var hashOf = CL.caseHash;

  /* The case's page in run `side`'s report, or null (no report, or not in that run). */
  function reportLink(row, side) {
    var base = reports[side];
    if (!base || !inRun(row, side)) return null;
    return el("a", { href: base + hashOf(row.id, data.metrics[row.metric]), className: "run-link",
                     "data-role": "report-" + side, title: "this case in " + sides[side] + "'s report",
                     text: side.toUpperCase() + " ↗" });
  }

  function render(row) {
    var tone = row.diff === null || row.diff === undefined || row.noise ? "" : row.diff < 0 ? "neg" : row.diff > 0 ? "pos" : "";
    var viewable = row.view >= 0;
    var idCell = viewable
      ? el("button", { type: "button", className: "link", "data-role": "open-ab", text: row.id,
                       title: "A and B side by side" })
      : document.createTextNode(row.id);
    var tr = el("tr", { "data-change": row.change, "data-case": row.id,
                        "data-regression": row.regression ? "true" : "false",
                        "data-noise": row.noise ? "true" : "false",
                        tabindex: viewable ? "0" : null, className: viewable ? "openable" : null }, [
      el("td", { className: "case" }, [idCell]),
      el("td", { text: data.metrics[row.metric] }),
      el("td", { className: "num", text: scoreText(row, "a") }),
      el("td", { className: "num", text: scoreText(row, "b") }),
      el("td", { className: "num diff " + tone, text: CL.diff(row.diff) }),
      el("td", {}, [el("span", { className: "pill " + (row.noise ? "" : TONE[row.change] || ""),
                                 text: changeText(row) })]),
      el("td", { className: "links" }, [reportLink(row, "a"), reportLink(row, "b")])
    ]);
    if (viewable) {
      tr.addEventListener("click", function (event) {
        if (event.target.closest && event.target.closest("a")) return;  // a link to a report
        open(row);
      });
      tr.addEventListener("keydown", function (event) { if (event.key === "Enter") open(row); });
    }
    return tr;
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

  /* -- a case in A and in B, side by side ------------------------------------------------ */

  var view = q("ab-view"), page = q("case-page"), position = q("case-position");
  if (!view) return;

  function sideHead(side) {
    return el("div", { className: "ab-side-head", "data-side": side }, [
      el("b", { text: side.toUpperCase() }), " = ", el("span", { text: sides[side] })
    ]);
  }

  /* One row of the view: A's piece beside B's; `same` (a text both runs share) once, across. */
  function pair(label, a, b, same) {
    if (!a && !b) return null;
    var cells = same
      ? [el("div", { className: "ab-cell ab-same" }, [a, el("div", { className: "ab-note", text: "the same in A and B" })])]
      : ["a", "b"].map(function (side) {
          var node = side === "a" ? a : b;
          return el("div", { className: "ab-cell", "data-side": side },
                    [node || el("p", { className: "note", text: "—" })]);
        });
    return el("div", { className: "ab-row", "data-row": label }, cells);
  }

  function scoresTable(id, focus) {
    var head = el("tr", {}, ["metric", "A", "B", "B − A", "change", "tolerance"].map(function (t, i) {
      return el("th", { className: i && i < 4 ? "num" : null, text: t });
    }));
    var body = (byCase[id] || []).map(function (row) {
      var tone = row.diff === null || row.diff === undefined || row.noise ? "" : row.diff < 0 ? "neg" : row.diff > 0 ? "pos" : "";
      var tolerance = (data.tolerances || [])[row.metric];
      return el("tr", { "data-metric": data.metrics[row.metric], "data-change": row.change,
                        className: data.metrics[row.metric] === focus ? "focused" : null }, [
        el("td", { className: "name", text: data.metrics[row.metric] }),
        el("td", { className: "num", "data-side": "a", text: scoreText(row, "a") }),
        el("td", { className: "num", "data-side": "b", text: scoreText(row, "b") }),
        el("td", { className: "num diff " + tone, text: CL.diff(row.diff) }),
        el("td", {}, [el("span", { className: "pill " + (row.noise ? "" : TONE[row.change] || ""), text: changeText(row) })]),
        el("td", { className: "muted", text: tolerance === null || tolerance === undefined ? "—" : "±" + Number(tolerance).toFixed(3) })
      ]);
    });
    return el("div", { className: "table-scroll ab-scores" }, [
      el("table", { "data-role": "ab-scores" }, [el("thead", {}, [head]), el("tbody", {}, body)])
    ]);
  }

  function build(row, focus) {
    var block = CL.json("cl-side-" + row.view) || {};
    var detail = { a: block.a, b: block.b };
    var p = {};
    ["a", "b"].forEach(function (side) {
      p[side] = detail[side] ? D.parts(detail[side], focus, side) : null;
    });
    var missing = function (side) {
      return el("p", { className: "note", "data-role": "not-in-run", text: "This case is not in run " + side.toUpperCase() + "." });
    };
    var piece = function (side, get) {
      var own = p[side];
      if (!own) return null;
      return get(own, detail[side]);
    };
    var sameText = function (field) {
      return detail.a && detail.b && detail.a[field] !== undefined && detail.a[field] === detail.b[field];
    };
    var meta = (detail.b || detail.a || {}).meta || {};
    var links = ["a", "b"].map(function (side) {
      var link = reportLink(row, side);
      if (link) link.textContent = "open in " + side.toUpperCase() + "'s report ↗";
      return link;
    });
    var nodes = [
      el("div", { className: "detail-head" }, [el("h2", {}, [el("code", { text: row.id })])]
        .concat(Object.keys(meta).map(function (key) { return el("span", { className: "chip", text: key + "=" + meta[key] }); }))
        .concat(links)),
      scoresTable(row.id, focus),
      el("div", { className: "ab-row ab-sides" }, [sideHead("a"), sideHead("b")]),
      pair("focused", piece("a", function (o) { return o.focused[0] || null; }) || (p.a ? null : missing("a")),
                      piece("b", function (o) { return o.focused[0] || null; }) || (p.b ? null : missing("b")))
    ];
    var kind = (p.a && p.a.kind) || (p.b && p.b.kind) || "";
    var text = function (name, field) {
      var a = piece("a", function (o) { return o.texts[name] || null; });
      var b = piece("b", function (o) { return o.texts[name] || null; });
      nodes.push(pair(name, a, b, field && sameText(field)));
    };
    if (kind === "session") {
      text("assistant", "assistant_id");
      text("system");
      nodes.push(pair("turns", piece("a", function (o) { return o.body; }), piece("b", function (o) { return o.body; })));
    } else if (kind === "case") {
      text("input", "input");  // no evidence is laid over the input: once when alike
      text("output");
      text("expected");
      text("reference");
      nodes.push(pair("chunks", piece("a", function (o) { return o.body; }), piece("b", function (o) { return o.body; })));
    } else {
      nodes.push(el("p", { className: "note", text: D.NO_CASES }));
    }
    var others = [];
    ["a", "b"].forEach(function (side) {
      (p[side] ? p[side].others : []).forEach(function (o) { if (others.indexOf(o.metric) === -1) others.push(o.metric); });
    });
    if (others.length) {
      nodes.push(el("h3", { className: "results-title", text: focus ? "The other metrics" : "Each metric" }));
      others.forEach(function (name) {
        var get = function (side) {
          if (!p[side]) return null;
          var found = p[side].others.filter(function (o) { return o.metric === name; })[0];
          return found ? found.node : el("p", { className: "note", text: name + ": no item in run " + side.toUpperCase() });
        };
        nodes.push(pair("metric:" + name, get("a"), get("b")));
      });
    }
    return el("div", { className: "case-detail ab-detail", "data-role": "ab-detail", "data-case": row.id,
                       "data-metric": focus || null, "data-case-root": "" }, nodes);
  }

  function viewable() { return rows.filter(function (r) { return r.view >= 0; }); }

  var caseView = CL.CaseView({
    q: q, view: view, page: page, position: position, home: "#changes",
    find: function (want) {
      var of = (byCase[want.case] || []).filter(function (r) { return r.view >= 0; });
      var row = of.filter(function (r) { return data.metrics[r.metric] === want.metric; })[0] || of[0];
      return row ? { row: row, metric: want.metric || data.metrics[row.metric] } : null;
    },
    build: build,
    listed: function (current) {
      var shown = pager.rows.filter(function (r) { return r.view >= 0; });
      return shown.indexOf(current) !== -1 ? shown : viewable();
    },
    hashOf: function (row) { return hashOf(row.id, data.metrics[row.metric]); },
    where: function (list, at) { return "change " + CL.count(at + 1) + " of " + CL.count(list.length); },
    missing: function (id) { return "No case " + id + " opens side by side on this page."; }
  });

  function open(row) { caseView.open(row); }
})();
