/* The case explorer: filters, a page of rows at a time, each case's drill-down built when
   it is opened from its own JSON block, and the slice table of a meta field. */
(function () {
  "use strict";
  var el = CL.el;
  var data = CL.json("cl-rows");
  var root = document.getElementById("cases");
  if (!data || !root) return;
  var metrics = data.metrics || [];
  var rows = (data.rows || []).map(function (row, index) {
    return { index: index, id: row[0], scores: row[1], statuses: row[2], meta: row[3] || {} };
  });
  var q = function (role) { return root.querySelector("[data-role='" + role + "']"); };
  var search = q("case-search"), statusFilter = q("status-filter"), scoreMetric = q("score-metric");
  var scoreMin = q("score-min"), scoreMax = q("score-max"), metaField = q("meta-field");
  var metaValue = q("meta-value"), metaText = q("meta-text");
  var sortKey = null, descending = false;
  var STATUS_TEXT = { pass: "pass", below: "below pass mark", failed: "failed", scored: "scored",
                      "not applicable": "not applicable", "not run": "not run" };
  var TONE = { pass: "good", below: "warn", failed: "bad", scored: "",
               "not applicable": "", "not run": "warn" };
  var NO_SCORE = { failed: "failed", "not applicable": "n/a", "not run": "not run" };

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

  function matches(row) {
    var needle = search ? search.value.trim().toLowerCase() : "";
    if (needle && row.id.toLowerCase().indexOf(needle) === -1) return false;
    var status = statusFilter ? statusFilter.value : "";
    if (status === "pass" && overall(row) !== "pass") return false;  // every metric passes
    if (status && status !== "pass" && row.statuses.indexOf(status) === -1) return false;
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

  function cell(row, at) {
    var status = row.statuses[at];
    if (!status) return el("td", { className: "num muted", text: "—" });
    return el("td", { className: "num", "data-status": status }, [
      el("span", { className: "pill " + TONE[status], title: STATUS_TEXT[status],
        text: NO_SCORE[status] || CL.score(row.scores[at]) })
    ]);
  }

  function metaChips(meta) {
    var keys = Object.keys(meta);
    return el("td", { className: "meta-cell" }, keys.slice(0, 4).map(function (key) {
      return el("span", { className: "chip", text: key + "=" + meta[key] });
    }).concat(keys.length > 4 ? [el("span", { className: "chip", text: "+" + (keys.length - 4) })] : []));
  }

  function renderRow(row) {
    var tr = el("tr", { "data-case": row.id, "data-index": row.index, "data-status": overall(row),
                        tabindex: "0", "aria-expanded": "false" },
      [el("td", { className: "case", text: row.id })]
        .concat(metrics.map(function (_, at) { return cell(row, at); }))
        .concat([metaChips(row.meta)]));
    var open = function () { toggle(tr, row); };
    tr.addEventListener("click", open);
    tr.addEventListener("keydown", function (event) { if (event.key === "Enter") open(); });
    if (!row.open) return tr;
    tr.setAttribute("aria-expanded", "true");
    var both = document.createDocumentFragment();
    both.appendChild(tr);
    both.appendChild(detailRow(row));
    return both;
  }

  function detailRow(row) {
    var detail = CL.json("cl-case-" + row.index) || { id: row.id, metrics: [] };
    var td = el("td", { colspan: String(metrics.length + 2) }, [drillDown(detail)]);
    return el("tr", { className: "detail" }, [td]);
  }

  function toggle(tr, row) {
    var next = tr.nextSibling;
    if (next && next.classList && next.classList.contains("detail")) {
      next.parentNode.removeChild(next);
      tr.setAttribute("aria-expanded", "false");
      row.open = false;
      return;
    }
    tr.parentNode.insertBefore(detailRow(row), tr.nextSibling);
    tr.setAttribute("aria-expanded", "true");
    row.open = true;
  }

  function block(label, text, role) {
    if (text === null || text === undefined || text === "") return null;
    return el("div", { className: "field", "data-role": role || null }, [
      el("h4", { text: label }), el("div", { className: "text", text: text })
    ]);
  }

  function verdictPill(verdict) {
    return el("span", { className: "pill " + (verdict === "yes" ? "good" : "bad"), text: verdict });
  }

  function chunkNotes(results, index) {
    var items = [];
    results.forEach(function (result) {
      ((result.chunks || {})[String(index)] || []).forEach(function (note) {
        if (note.kind === "statement") {
          items.push(el("li", { "data-role": "verdict", "data-verdict": note.verdict,
                                "data-metric": result.metric }, [
            verdictPill(note.verdict), " ", el("span", { className: "statement", text: note.text }),
            note.reason ? el("span", { className: "why", text: " — " + note.reason }) : null,
            el("span", { className: "tag", text: result.metric })
          ]));
        } else {
          items.push(el("li", { "data-role": "chunk-value", "data-metric": result.metric }, [
            el("span", { className: "label", text: note.label + " " }),
            el("b", { text: note.value === null || note.value === undefined ? "" : CL.score(note.value) }),
            el("span", { className: "tag", text: result.metric })
          ]));
        }
      });
    });
    return items.length ? el("ul", { className: "notes" }, items) : null;
  }

  function chunks(detail, results) {
    var list = detail.chunks || [];
    if (!list.length) return null;
    return el("div", { className: "field" }, [
      el("h4", { text: "Retrieved chunks (" + list.length + ")" })
    ].concat(list.map(function (text, i) {
      return el("div", { className: "chunk", "data-role": "chunk", "data-chunk": String(i) }, [
        el("div", { className: "chunk-head", text: "chunk " + i }),
        el("div", { className: "text", text: text }),
        chunkNotes(results, i)
      ]);
    })));
  }

  function turns(detail, results) {
    return el("div", { className: "field" }, [el("h4", { text: "Turns (" + detail.turns.length + ")" })]
      .concat(detail.turns.map(function (turn) {
        var verdicts = [];
        results.forEach(function (result) {
          var note = (result.turns || {})[turn.qa_id];
          if (!note) return;
          verdicts.push(el("div", { className: "turn-verdict", "data-role": "turn-verdict",
                                    "data-metric": result.metric }, [
            el("span", { className: "pill " + (note.error ? "bad" : "accent"),
                         text: note.error ? "failed" : CL.score(note.score) }),
            el("span", { className: "tag", text: result.metric }),
            note.reason ? el("div", { className: "why", text: note.reason }) : null,
            note.claim ? el("div", { className: "claim" }, [el("b", { text: "least supported claim: " }),
              note.claim + (note.claim_support !== undefined ? " (support " + CL.score(note.claim_support) + ")" : "")]) : null,
            note.evidence ? el("div", { className: "claim" }, [el("b", { text: "closest evidence sentence: " }),
              note.evidence]) : null,
            note.error ? el("div", { className: "error", text: note.error }) : null,
            note.raw_reply ? el("details", { "data-role": "raw-reply" }, [
              el("summary", { text: "the judge's last reply" }), el("pre", { text: note.raw_reply })]) : null
          ]));
        });
        return el("div", { className: "turn", "data-role": "turn", "data-qa": turn.qa_id }, [
          el("div", { className: "chunk-head", text: turn.qa_id + (turn.weight !== null && turn.weight !== undefined ? " · weight " + turn.weight : "") }),
          block("query", turn.query), block("reply", turn.assistant),
          block("reference reply", turn.ground_truth), block("observation", turn.observation)
        ].concat(verdicts));
      })));
  }

  function metricResult(result) {
    var facts = (result.facts || []).map(function (fact) {
      return el("div", {}, [el("dt", { text: fact[0] }), el("dd", { text: fact[1] })]);
    });
    return el("div", { className: "result", "data-role": "metric-result", "data-metric": result.metric }, [
      el("div", { className: "result-head" }, [
        el("b", { text: result.metric }), " ",
        el("span", { className: "pill " + TONE[result.status || "scored"], "data-status": result.status || "scored",
                     text: NO_SCORE[result.status] ? STATUS_TEXT[result.status] : CL.score(result.score) + " · " + STATUS_TEXT[result.status || "scored"] }),
        result.judge ? el("span", { className: "tag", text: "judge " + result.judge }) : null,
        result.spread !== null && result.spread !== undefined
          ? el("span", { className: "tag", text: "± " + CL.score(result.spread) + " over repeats" }) : null
      ]),
      result.reason ? el("div", { className: "why", text: result.reason }) : null,
      result.why_not ? el("div", { className: "why", "data-role": "not-scored", text: result.why_not }) : null,
      result.error ? el("div", { className: "error", "data-role": "failure-reason", text: result.error }) : null,
      result.raw_reply ? el("details", { "data-role": "raw-reply", open: true }, [
        el("summary", { text: "the judge's last reply" }), el("pre", { text: result.raw_reply })]) : null,
      facts.length ? el("dl", { className: "facts" }, facts) : null
    ]);
  }

  function drillDown(detail) {
    var results = detail.metrics || [];
    var meta = detail.meta || {};
    var parts = [el("div", { className: "detail-head" }, [el("code", { text: detail.id })]
      .concat(Object.keys(meta).map(function (key) {
        var value = meta[key];
        return el("span", { className: "chip", text: key + "=" + (typeof value === "string" ? value : JSON.stringify(value)) });
      })))];
    if (detail.kind === "session") {
      parts.push(block("assistant", detail.assistant_id));
      parts.push(block("system context", detail.system_context, "system-context"));
      parts.push(turns(detail, results));
    } else if (detail.kind === "case") {
      parts.push(block("input", detail.input, "input"));
      parts.push(block("output", detail.output, "output"));
      parts.push(block("expected output", detail.expected, "expected"));
      parts.push(chunks(detail, results));
      if ((detail.reference || []).length) {
        parts.push(el("div", { className: "field" }, [el("h4", { text: "reference context" })]
          .concat(detail.reference.map(function (text) { return el("div", { className: "text", text: text }); }))));
      }
    } else {
      parts.push(el("p", { className: "note", text: "This run did not record its cases (no cases.jsonl): only the results are shown." }));
    }
    parts.push(el("div", { className: "results" }, results.map(metricResult)));
    return el("div", { className: "case-detail", "data-role": "case-detail" }, parts);
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
      descending = sortKey === key ? !descending : key !== "id";
      sortKey = key;
      root.querySelectorAll("th[data-sort]").forEach(function (other) { other.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      refresh();
    });
  });
  [search, statusFilter, scoreMetric, scoreMin, scoreMax, metaValue, metaText].forEach(function (input) {
    if (input) { input.addEventListener("input", refresh); input.addEventListener("change", refresh); }
  });
  if (metaField) metaField.addEventListener("change", function () { fillMetaValues(); refresh(); });
  if (metaField) fillMetaValues();
  refresh();

  /* slices */
  var sliceField = document.querySelector("[data-role='slice-field']");
  var sliceTable = document.querySelector("[data-role='slice-table']");
  function renderSlices() {
    var slices = (data.slices || {})[sliceField.value] || [];
    var head = el("tr", {}, [el("th", { text: sliceField.value }), el("th", { className: "num", text: "cases" })]
      .concat(metrics.map(function (m) { return el("th", { className: "num", text: m }); })));
    var body = slices.map(function (slice) {
      return el("tr", { "data-slice": slice.value }, [el("td", { className: "case", text: slice.value }),
        el("td", { className: "num", text: CL.count(slice.cases) })].concat(slice.metrics.map(function (s, at) {
          var interval = s.low !== null && s.low !== undefined ? " [" + CL.score(s.low) + ", " + CL.score(s.high) + "]" : "";
          var rate = s.pass === null || s.pass === undefined ? null
            : "pass " + CL.percent(s.pass) + (s.pass_low !== null && s.pass_low !== undefined
              ? " [" + CL.percent(s.pass_low) + ", " + CL.percent(s.pass_high) + "]" : "");
          return el("td", { className: "num", "data-metric": metrics[at], "data-field": "mean", "data-value": s.mean === null ? "" : String(s.mean) }, [
            el("b", { text: CL.score(s.mean) }), el("span", { className: "interval", text: interval }),
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
