/* The case explorer: filters, a page of rows at a time, a case opened as a page of its own
   (#case=ID, deep-linkable) built from its JSON block with each metric's evidence laid over
   its texts (casedetail.js), and the slice table of a meta field. Every text goes in through
   textContent. */
(function () {
  "use strict";
  var el = CL.el;
  var data = CL.json("cl-rows");
  var root = document.getElementById("cases");
  if (!data || !root) return;
  var metrics = data.metrics || [];
  var byId = {};
  var rows = (data.rows || []).map(function (row, index) {
    var made = { index: index, id: row[0], scores: row[1], statuses: row[2], meta: row[3] || {},
                 input: row[4] || "", answer: row[5] || "", hay: null };
    byId[made.id] = made;
    return made;
  });
  var q = function (role) { return root.querySelector("[data-role='" + role + "']"); };
  var search = q("case-search"), statusFilter = q("status-filter"), statusMetric = q("status-metric");
  var scoreMetric = q("score-metric"), scoreMin = q("score-min"), scoreMax = q("score-max");
  var metaField = q("meta-field"), metaValue = q("meta-value"), metaText = q("meta-text");
  var sortKey = null, descending = false;
  var STATUS_TEXT = CL.detail.STATUS_TEXT, TONE = CL.detail.TONE, NO_SCORE = CL.detail.NO_SCORE;

  /* The case's status: its worst item's; a metric that does not apply to it is left out,
     so "pass" is every metric that applies passing. */
  function overall(row) {
    var statuses = row.statuses.filter(function (s) { return s; });
    var worst = ["failed", "below", "not run"].filter(function (s) { return statuses.indexOf(s) !== -1; });
    if (worst.length) return worst[0];
    var applied = statuses.filter(function (s) { return s !== "not applicable"; });
    if (!applied.length) return statuses.length ? "not applicable" : "scored";
    return applied.every(function (s) { return s === "pass"; }) ? "pass" : "scored";
  }

  function number(input) {
    var value = input && input.value.trim() !== "" ? parseFloat(input.value) : NaN;
    return isNaN(value) ? null : value;
  }

  function haystack(row) {
    if (row.hay === null) row.hay = (row.id + "\n" + row.input + "\n" + row.answer).toLowerCase();
    return row.hay;
  }

  function matches(row) {
    var needle = search ? search.value.trim().toLowerCase() : "";
    if (needle && haystack(row).indexOf(needle) === -1) return false;
    var status = statusFilter ? statusFilter.value : "";
    var of = statusMetric && statusMetric.value !== "" ? parseInt(statusMetric.value, 10) : null;
    if (status && of !== null) {
      if (row.statuses[of] !== status) return false;
    } else if (status === "pass") {
      if (overall(row) !== "pass") return false;  // every metric that applies passes
    } else if (status && row.statuses.indexOf(status) === -1) {
      return false;
    }
    var low = number(scoreMin), high = number(scoreMax);
    if (low !== null || high !== null) {
      var at = scoreMetric ? parseInt(scoreMetric.value, 10) : 0;
      var value = row.scores[at];
      if (value === null || value === undefined) return false;
      if (low !== null && value < low) return false;
      if (high !== null && value > high) return false;
    }
    var field = metaField ? metaField.value : "";
    if (field) {
      var have = row.meta[field];
      var choices = data.meta_fields[field] || [];
      if (choices.length) {
        if (metaValue.value !== "" && have !== metaValue.value) return false;
      } else if (metaText.value.trim()) {
        if (have === undefined || String(have).toLowerCase()
            .indexOf(metaText.value.trim().toLowerCase()) === -1) return false;
      }
    }
    return true;
  }

  /* -- the table -------------------------------------------------------------------------- */

  function cell(row, at) {
    var status = row.statuses[at];
    if (!status) return el("td", { className: "num muted", text: "—" });
    return el("td", { className: "num", "data-status": status }, [
      el("span", { className: "pill " + TONE[status], title: metrics[at] + ": " + STATUS_TEXT[status],
        text: NO_SCORE[status] || CL.score(row.scores[at]) })
    ]);
  }

  /* A cell of at most two lines, the whole text in its title. */
  function clamped(className, text) {
    return el("td", { className: className, title: text || null }, [el("div", { className: "clamp", text: text })]);
  }

  function metaCell(meta) {
    return clamped("meta-cell", Object.keys(meta).map(function (key) { return key + "=" + meta[key]; }).join(" · "));
  }

  function renderRow(row) {
    var tr = el("tr", { "data-case": row.id, "data-index": row.index, "data-status": overall(row),
                        tabindex: "0" },
      [el("td", { className: "case", title: row.id, text: row.id }),
       clamped("excerpt", row.input), clamped("excerpt", row.answer)]
        .concat(metrics.map(function (_, at) { return cell(row, at); }))
        .concat([metaCell(row.meta)]));
    tr.addEventListener("click", function () { open(row); });
    tr.addEventListener("keydown", function (event) { if (event.key === "Enter") open(row); });
    return tr;
  }

  var pager = new CL.Pager({
    body: q("case-rows"), render: renderRow, size: 100, status: q("case-count"),
    pageLabel: q("page"), prev: q("prev"), next: q("next")
  });

  function refresh() {
    var shown = rows.filter(matches);
    if (sortKey !== null) {
      shown = shown.slice().sort(function (a, b) {
        var va = sortKey === "id" ? a.id : a.scores[sortKey];
        var vb = sortKey === "id" ? b.id : b.scores[sortKey];
        return CL.compare(va, vb, descending) || a.index - b.index;
      });
    }
    pager.show(shown, rows.length);
  }

  function sortBy(key, down) {
    sortKey = key;
    descending = down;
    root.querySelectorAll("th[data-sort]").forEach(function (th) {
      var own = th.getAttribute("data-sort");
      var match = key !== null && own === String(key);
      if (match) th.setAttribute("aria-sort", down ? "descending" : "ascending");
      else th.removeAttribute("aria-sort");
    });
  }

  function fillMetaValues() {
    var field = metaField.value;
    var choices = field ? data.meta_fields[field] || [] : [];
    metaValue.textContent = "";
    metaValue.appendChild(el("option", { value: "", text: "any value" }));
    choices.forEach(function (value) { metaValue.appendChild(el("option", { value: value, text: value })); });
    metaValue.hidden = !field || !choices.length;
    metaText.hidden = !field || !!choices.length;
  }

  root.querySelectorAll("th[data-sort]").forEach(function (th) {
    th.addEventListener("click", function () {
      var key = th.getAttribute("data-sort");
      key = key === "id" ? "id" : parseInt(key, 10);
      sortBy(key, sortKey === key ? !descending : false);
      refresh();
    });
  });
  [search, statusFilter, statusMetric, scoreMetric, scoreMin, scoreMax, metaValue, metaText].forEach(function (input) {
    if (input) { input.addEventListener("input", refresh); input.addEventListener("change", refresh); }
  });
  if (metaField) metaField.addEventListener("change", function () { fillMetaValues(); refresh(); });
  if (metaField) fillMetaValues();
  var reset = q("case-reset");
  if (reset) reset.addEventListener("click", function () {
    [search, scoreMin, scoreMax, metaText].forEach(function (input) { if (input) input.value = ""; });
    [statusFilter, statusMetric, metaField].forEach(function (select) { if (select) select.value = ""; });
    if (metaField) fillMetaValues();
    sortBy(null, false);
    refresh();
  });
  /* "all N below the pass mark": the table filtered to that metric's status, worst first */
  document.querySelectorAll("a[data-filter-status]").forEach(function (link) {
    link.addEventListener("click", function () {
      var at = link.getAttribute("data-filter-metric");
      statusFilter.value = link.getAttribute("data-filter-status");
      statusMetric.value = at;
      sortBy(parseInt(at, 10), false);
      refresh();
    });
  });
  refresh();

  /* -- opening and closing a case (#case=ID&metric=NAME) --------------------------------- */

  var caseView = CL.CaseView({
    q: q, view: q("case-view"), page: q("case-page"), position: q("case-position"), home: "#cases",
    find: function (want) { var row = byId[want.case]; return row ? { row: row, metric: want.metric } : null; },
    build: function (row, metric) {
      var detail = CL.json("cl-case-" + row.index) || { id: row.id, metrics: [] };
      return CL.detail.drillDown(detail, metric);
    },
    listed: function (current) { return pager.rows.indexOf(current) !== -1 ? pager.rows : rows; },
    hashOf: function (row, metric) { return CL.caseHash(row.id, metric); },
    where: function (list, at) {
      return "case " + CL.count(at + 1) + " of " + CL.count(list.length) + (list === rows ? "" : " shown");
    },
    missing: function (id) { return "No case " + id + " in this report."; }
  });

  function open(row, metric) { caseView.open(row, metric); }

  /* -- slices ------------------------------------------------------------------------------ */
  var sliceField = document.querySelector("[data-role='slice-field']");
  var sliceTable = document.querySelector("[data-role='slice-table']");
  function interval(low, high, note, fmt) {
    if (low !== null && low !== undefined && high !== null && high !== undefined) return " [" + fmt(low) + ", " + fmt(high) + "]";
    return note ? " (" + note + ")" : "";
  }
  function renderSlices() {
    var slices = (data.slices || {})[sliceField.value] || [];
    var head = el("tr", {}, [el("th", { text: sliceField.value }), el("th", { className: "num", text: "cases" })]
      .concat(metrics.map(function (m) { return el("th", { className: "num", text: m }); })));
    var body = slices.map(function (slice) {
      return el("tr", { "data-slice": slice.value }, [el("td", { className: "case", text: slice.value }),
        el("td", { className: "num", text: CL.count(slice.cases) })].concat(slice.metrics.map(function (s, at) {
          var rate = s.pass === null || s.pass === undefined ? null
            : "pass " + CL.percent(s.pass) + interval(s.pass_low, s.pass_high, s.pass_note, CL.percent);
          return el("td", { className: "num", "data-metric": metrics[at], "data-field": "mean", "data-value": s.mean === null ? "" : String(s.mean) }, [
            el("b", { text: CL.score(s.mean) }),
            el("span", { className: "interval", "data-field": "interval", text: s.n ? interval(s.low, s.high, s.note, CL.score) : "" }),
            el("span", { className: "n", text: " n " + CL.count(s.n) + (s.failed ? " · " + s.failed + " failed" : "") }),
            rate ? el("span", { className: "rate", "data-field": "pass_rate", "data-value": String(s.pass), text: rate }) : null
          ]);
        })));
    });
    sliceTable.textContent = "";
    sliceTable.appendChild(el("table", { className: "slice-table" }, [el("thead", {}, [head]), el("tbody", {}, body)]));
  }
  if (sliceField && sliceTable) {
    sliceField.addEventListener("change", renderSlices);
    if (sliceField.value) renderSlices();
  }
})();
