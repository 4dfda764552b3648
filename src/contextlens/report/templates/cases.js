/* The case explorer: filters, a page of rows at a time, a case opened as a page of its own
   (#case=ID, deep-linkable) built from its JSON block with each metric's evidence laid over
   its texts, and the slice table of a meta field. Every text goes in through textContent. */
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
  var STATUS_TEXT = { pass: "pass", below: "below pass mark", failed: "failed", scored: "scored",
                      "not applicable": "not applicable", "not run": "not run" };
  var TONE = { pass: "good", below: "warn", failed: "bad", scored: "",
               "not applicable": "", "not run": "warn" };
  var NO_SCORE = { failed: "failed", "not applicable": "n/a", "not run": "not run" };
  var RANK = { bad: 4, warn: 3, good: 2, accent: 1 };

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

  /* -- evidence over a text ---------------------------------------------------------------- */

  /* The marks of the field `name`: each metric's that is on it, or on a list of fields of
     which it is the first that holds the marked text. */
  function marksOn(results, name, texts) {
    var found = [];
    results.forEach(function (result) {
      (result.marks || []).forEach(function (mark) {
        var on = mark.on;
        if (Array.isArray(on)) {
          on = on.filter(function (f) { return (texts(f) || "").indexOf(mark.text) !== -1; })[0];
        }
        if (on === name) found.push({ mark: mark, metric: result.metric });
      });
    });
    return found;
  }

  /* `text` with each mark's first occurrence highlighted; overlapping marks share a span
     titled with all their labels. */
  function marked(text, marks, role) {
    var box = el("div", { className: "text", "data-role": role || null });
    if (text === null || text === undefined) return box;
    text = String(text);
    var lower = text.toLowerCase(), spans = [];
    marks.forEach(function (m) {
      var at = text.indexOf(m.mark.text);
      if (at === -1 && lower.length === text.length) at = lower.indexOf(m.mark.text.toLowerCase());
      if (at !== -1 && m.mark.text) spans.push({ start: at, end: at + m.mark.text.length, m: m });
    });
    if (!spans.length) { box.textContent = text; return box; }
    var cuts = [0, text.length];
    spans.forEach(function (s) { cuts.push(s.start, s.end); });
    cuts = cuts.filter(function (c, i) { return cuts.indexOf(c) === i; }).sort(function (a, b) { return a - b; });
    for (var i = 0; i + 1 < cuts.length; i++) {
      var a = cuts[i], b = cuts[i + 1];
      var piece = text.slice(a, b);
      var over = spans.filter(function (s) { return s.start <= a && s.end >= b; });
      if (!over.length) { box.appendChild(document.createTextNode(piece)); continue; }
      var tone = over.map(function (s) { return s.m.mark.tone; })
        .sort(function (x, y) { return (RANK[y] || 0) - (RANK[x] || 0); })[0];
      var title = over.map(function (s) { return s.m.metric + ": " + s.m.mark.label; }).join("\n");
      box.appendChild(el("mark", { className: "mk " + (tone || "accent"), title: title,
                                   "data-metric": over[0].m.metric }, [piece]));
      over.forEach(function (s) {
        if (s.end === b && s.m.mark.tag) box.appendChild(el("sup", { className: "mk-tag " + s.m.mark.tone, text: s.m.mark.tag }));
      });
    }
    return box;
  }

  function block(label, text, role, marks) {
    if (text === null || text === undefined || text === "") return null;
    return el("div", { className: "field" }, [
      el("h4", { text: label }), marked(text, marks || [], role)
    ]);
  }

  function pill(tone, text, attrs) {
    var own = { className: "pill " + (tone || ""), text: text };
    Object.keys(attrs || {}).forEach(function (k) { own[k] = attrs[k]; });
    return el("span", own);
  }

  function tag(text) { return el("span", { className: "tag", text: text }); }

  /* -- a case's page --------------------------------------------------------------------- */

  function chunkHead(detail, results, i) {
    var parts = [el("b", { text: "#" + (i + 1) }), el("span", { className: "muted", text: "retrieval_context[" + i + "]" })];
    var ids = detail.retrieved_ids || [];
    if (i < ids.length) {
      var grade = detail.relevant_ids ? detail.relevant_ids[ids[i]] : undefined;
      var hit = null;
      results.forEach(function (r) {
        ((r.chunks || {})[String(i)] || []).forEach(function (n) { if (n.kind === "hit") hit = n; });
      });
      parts.push(el("span", { className: "chip", text: "id " + ids[i] }));
      if (detail.relevant_ids) {
        var relevant = hit ? hit.relevant : grade !== undefined && grade >= 1;
        parts.push(pill(relevant ? "good" : grade === undefined ? "" : "bad",
          relevant ? "relevant" + (grade !== undefined ? " (grade " + grade + ")" : "")
                   : grade === undefined ? "not judged" : "judged not relevant",
          { "data-role": "hit", "data-relevant": relevant ? "true" : "false" }));
        if (hit && !hit.within) parts.push(tag("beyond k"));
      }
    }
    return el("div", { className: "chunk-head" }, parts);
  }

  function chunkNotes(results, index) {
    var items = [];
    results.forEach(function (result) {
      ((result.chunks || {})[String(index)] || []).forEach(function (note) {
        var m = result.metric;
        if (note.kind === "statement") {
          items.push(el("li", { "data-role": "verdict", "data-verdict": note.verdict, "data-metric": m }, [
            pill(note.verdict === "yes" ? "good" : "bad", note.verdict === "yes" ? "relevant" : "not relevant"), " ",
            el("span", { className: "statement", text: note.text }),
            note.reason ? el("span", { className: "why", text: " — " + note.reason }) : null,
            tag(m)
          ]));
        } else if (note.kind === "claim") {
          var yes = note.verdict === "yes";
          items.push(el("li", { "data-role": "claim", "data-verdict": note.verdict, "data-metric": m }, [
            pill(yes ? "good" : "bad", yes ? "supported" : "not supported"), " ",
            el("span", { className: "label", text: "claim " + note.n + " of " + note.whose + ": " }),
            el("span", { className: "statement", text: note.text }),
            note.support !== null && note.support !== undefined ? el("span", { className: "why", text: " · support " + CL.score(note.support) }) : null,
            note.sentence ? el("span", { className: "why", text: " · its closest sentence is marked" }) : null,
            tag(m)
          ]));
        } else if (note.kind === "rank") {
          var useful = note.verdict === "yes";
          items.push(el("li", { "data-role": "rank-verdict", "data-verdict": note.verdict, "data-metric": m }, [
            pill(useful ? "good" : "bad", "rank " + note.rank + ": " + (useful ? "useful" : "not useful")), " ",
            note.value !== null && note.value !== undefined ? el("span", { className: "label", text: "usefulness " + CL.score(note.value) + " " }) : null,
            note.reason ? el("span", { className: "why", text: note.reason }) : null,
            note.merged ? el("span", { className: "why", text: " · merged with " + note.merged }) : null,
            tag(m)
          ]));
        } else if (note.kind === "value") {
          items.push(el("li", { "data-role": "chunk-value", "data-metric": m }, [
            el("span", { className: "label", text: note.label + " " }),
            el("b", { text: note.value === null || note.value === undefined ? "" : CL.score(note.value) }),
            tag(m)
          ]));
        }
      });
    });
    return items.length ? el("ul", { className: "notes" }, items) : null;
  }

  function chunks(detail, results, texts) {
    var list = detail.chunks || [];
    if (!list.length) return null;
    return el("div", { className: "field chunks" }, [
      el("h3", { text: "Retrieved chunks (" + list.length + "), best first" })
    ].concat(list.map(function (text, i) {
      return el("div", { className: "chunk", "data-role": "chunk", "data-chunk": String(i), id: "cl-chunk-" + i }, [
        chunkHead(detail, results, i),
        marked(text, marksOn(results, "chunk:" + i, texts)),
        chunkNotes(results, i)
      ]);
    })));
  }

  function turns(detail, results, texts) {
    return el("div", { className: "field" }, [el("h3", { text: "Turns (" + detail.turns.length + ")" })]
      .concat(detail.turns.map(function (turn) {
        var verdicts = [];
        results.forEach(function (result) {
          var note = (result.turns || {})[turn.qa_id];
          if (!note) return;
          var scored = note.score !== null && note.score !== undefined;
          verdicts.push(el("div", { className: "turn-verdict", "data-role": "turn-verdict",
                                    "data-metric": result.metric }, [
            pill(note.error ? "bad" : "accent", note.error ? "failed" : scored ? CL.score(note.score) : "not applicable"),
            tag(result.metric),
            note.reason ? el("div", { className: "why", text: note.reason }) : null,
            note.not_applicable ? el("div", { className: "why", text: note.not_applicable }) : null,
            note.claim ? el("div", { className: "claim" }, [el("b", { text: "least supported claim (marked): " }),
              note.claim + (note.claim_support !== undefined ? " (support " + CL.score(note.claim_support) + ")" : "")]) : null,
            note.evidence ? el("div", { className: "claim" }, [el("b", { text: "closest evidence sentence (marked): " }),
              note.evidence]) : null,
            note.error ? el("div", { className: "error", text: note.error }) : null,
            note.raw_reply ? el("details", { "data-role": "raw-reply" }, [
              el("summary", { text: "the judge's last reply" }), el("pre", { text: note.raw_reply })]) : null
          ]));
        });
        var key = "turn:" + turn.qa_id + ":";
        var meta = turn.meta || {};
        return el("div", { className: "turn", "data-role": "turn", "data-qa": turn.qa_id }, [
          el("div", { className: "chunk-head" }, [el("b", { text: turn.qa_id }),
            turn.weight !== null && turn.weight !== undefined ? tag("weight " + turn.weight) : null]
            .concat(Object.keys(meta).map(function (k) { return el("span", { className: "chip", text: k + "=" + meta[k] }); }))),
          block("query", turn.query),
          block("reply", turn.assistant, null, marksOn(results, key + "assistant", texts)),
          block("reference reply", turn.ground_truth, null, marksOn(results, key + "ground_truth", texts)),
          block("observation", turn.observation, null, marksOn(results, key + "observation", texts))
        ].concat(verdicts));
      })));
  }

  function tableOf(table) {
    var head = el("tr", {}, table.columns.map(function (c) { return el("th", { text: c }); }));
    var body = table.rows.map(function (cells, r) {
      return el("tr", { className: table.tones[r] ? "tone-" + table.tones[r] : null }, cells.map(function (c) {
        if (c === null || c === undefined) return el("td", { text: "" });
        if (typeof c !== "object") return el("td", { text: String(c) });
        if (c.chunk !== undefined && c.chunk !== null) {
          var go = el("button", { type: "button", className: "link", text: c.text, title: "show this chunk" });
          go.addEventListener("click", function () { showChunk(c.chunk); });
          return el("td", {}, [go]);
        }
        return el("td", {}, [c.tone ? pill(c.tone, c.text) : el("span", { text: c.text })]);
      }));
    });
    return el("div", { className: "evidence-table", "data-role": "evidence-table" }, [
      el("h4", { text: table.title }),
      el("div", { className: "table-scroll" }, [el("table", {}, [el("thead", {}, [head]), el("tbody", {}, body)])])
    ]);
  }

  function showChunk(index) {
    var card = page.querySelector("#cl-chunk-" + index);
    if (!card) return;
    card.scrollIntoView({ block: "center" });
    card.classList.remove("flash");
    void card.offsetWidth;
    card.classList.add("flash");
  }

  function metricResult(result, focused) {
    var status = result.status || "scored";
    var facts = (result.facts || []).map(function (fact) {
      return el("div", {}, [el("dt", { text: fact[0] }), el("dd", { text: fact[1] })]);
    });
    return el("section", { className: "result" + (focused ? " focused" : ""), "data-role": "metric-result",
                           "data-metric": result.metric }, [
      el("div", { className: "result-head" }, [
        el("h3", { text: result.metric }),
        pill(TONE[status], NO_SCORE[status] ? STATUS_TEXT[status] : CL.score(result.score) + " · " + STATUS_TEXT[status],
             { "data-status": status }),
        result.judge ? tag("judge " + result.judge) : null,
        result.spread !== null && result.spread !== undefined ? tag("± " + CL.score(result.spread) + " over repeats") : null
      ]),
      result.reason ? el("div", { className: "why", text: result.reason }) : null,
      result.why_not ? el("div", { className: "why", "data-role": "not-scored", text: result.why_not }) : null,
      result.error ? el("div", { className: "error", "data-role": "failure-reason", text: result.error }) : null,
      result.raw_reply ? el("details", { "data-role": "raw-reply" }, [
        el("summary", { text: "the judge's last reply" }), el("pre", { text: result.raw_reply })]) : null
    ].concat((result.tables || []).map(tableOf))
     .concat([facts.length ? el("dl", { className: "facts" }, facts) : null]));
  }

  function scoreStrip(results) {
    return el("div", { className: "score-strip" }, results.map(function (result) {
      var status = result.status || "scored";
      var go = el("button", { type: "button", className: "strip-item", "data-metric": result.metric }, [
        el("span", { className: "name", text: result.metric }),
        pill(TONE[status], NO_SCORE[status] || CL.score(result.score))
      ]);
      go.addEventListener("click", function () {
        var target = resultNode(result.metric);
        if (target) target.scrollIntoView({ block: "start" });
      });
      return go;
    }));
  }

  function resultNode(metric) {
    var found = page.querySelectorAll("[data-role=metric-result]");
    for (var i = 0; i < found.length; i++) {
      if (found[i].getAttribute("data-metric") === metric) return found[i];
    }
    return null;
  }

  function drillDown(detail, focus) {
    var results = detail.metrics || [];
    var meta = detail.meta || {};
    var turnsById = {};
    (detail.turns || []).forEach(function (t) { turnsById[t.qa_id] = t; });
    var texts = function (name) {
      if (name.indexOf("chunk:") === 0) return (detail.chunks || [])[parseInt(name.slice(6), 10)];
      if (name.indexOf("turn:") === 0) {
        var cut = name.lastIndexOf(":");
        var turn = turnsById[name.slice(5, cut)];
        return turn ? turn[name.slice(cut + 1)] : null;
      }
      return detail[name];
    };
    var focused = results.filter(function (r) { return r.metric === focus; });
    var others = results.filter(function (r) { return r.metric !== focus; });
    var parts = [
      el("div", { className: "detail-head" }, [el("h2", {}, [el("code", { text: detail.id })])]
        .concat(Object.keys(meta).map(function (key) { return el("span", { className: "chip", text: key + "=" + meta[key] }); }))),
      scoreStrip(results)
    ].concat(focused.map(function (r) { return metricResult(r, true); }));
    if (detail.kind === "session") {
      parts.push(el("div", { className: "texts" }, [
        block("assistant", detail.assistant_id),
        block("system context", detail.system_context, "system-context", marksOn(results, "system_context", texts))
      ]));
      parts.push(turns(detail, results, texts));
    } else if (detail.kind === "case") {
      parts.push(el("div", { className: "texts" }, [
        block("input", detail.input, "input"),
        block("answer", detail.output, "output", marksOn(results, "output", texts)),
        block("expected output", detail.expected, "expected", marksOn(results, "expected", texts)),
        (detail.reference || []).length ? el("div", { className: "field" }, [el("h4", { text: "reference context" })]
          .concat(detail.reference.map(function (text) { return el("div", { className: "text", text: text }); }))) : null
      ]));
      parts.push(chunks(detail, results, texts));
    } else {
      parts.push(el("p", { className: "note", text: "This run did not record its cases (no cases.jsonl): only the results are shown." }));
    }
    if (others.length) {
      parts.push(el("h3", { className: "results-title", text: focused.length ? "The other metrics" : "Each metric" }));
      parts.push(el("div", { className: "results" }, others.map(function (r) { return metricResult(r, false); })));
    }
    return el("div", { className: "case-detail", "data-role": "case-detail", "data-case": detail.id }, parts);
  }

  /* -- opening and closing a case (#case=ID&metric=NAME) --------------------------------- */

  var view = q("case-view"), page = q("case-page"), position = q("case-position");
  var current = null, landed = false, returnTo = null;

  function hashOf(id, metric) {
    return "#case=" + encodeURIComponent(id) + (metric ? "&metric=" + encodeURIComponent(metric) : "");
  }

  function parsed() {
    var hash = location.hash.replace(/^#/, "");
    if (hash.indexOf("case=") !== 0) return null;
    var out = {};
    hash.split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at < 1) return;
      try { out[part.slice(0, at)] = decodeURIComponent(part.slice(at + 1)); } catch (err) { /* not a link of ours */ }
    });
    return out.case === undefined ? null : out;
  }

  function listed() {
    return pager.rows.indexOf(current) !== -1 ? pager.rows : rows;
  }

  function show(row, metric) {
    current = row;
    var detail = CL.json("cl-case-" + row.index) || { id: row.id, metrics: [] };
    page.textContent = "";
    page.appendChild(drillDown(detail, metric));
    var list = listed(), at = list.indexOf(row);
    position.textContent = "case " + CL.count(at + 1) + " of " + CL.count(list.length) +
      (list === rows ? "" : " shown");
    q("case-prev").disabled = at <= 0;
    q("case-next").disabled = at >= list.length - 1;
    if (view.hidden) returnTo = document.activeElement;
    view.hidden = false;
    document.documentElement.classList.add("case-open");
    view.scrollTop = 0;
    q("case-close").focus({ preventScroll: true });
  }

  function missing(id) {
    current = null;
    page.textContent = "";
    page.appendChild(el("p", { className: "note", "data-role": "case-missing", text: "No case " + id + " in this report." }));
    position.textContent = "";
    view.hidden = false;
    document.documentElement.classList.add("case-open");
  }

  function hide() {
    if (view.hidden) return;
    view.hidden = true;
    page.textContent = "";
    current = null;
    document.documentElement.classList.remove("case-open");
    if (returnTo && document.body.contains(returnTo)) returnTo.focus({ preventScroll: true });
  }

  function route() {
    var want = parsed();
    if (!want) { hide(); return; }
    var row = byId[want.case];
    if (row) show(row, want.metric); else missing(want.case);
  }

  function open(row, metric) {
    landed = false;
    location.hash = hashOf(row.id, metric);
  }

  function close() {
    if (landed) { landed = false; location.replace("#cases"); } else history.back();
  }

  function step(by) {
    if (!current) return;
    var list = listed(), at = list.indexOf(current) + by;
    if (at >= 0 && at < list.length) location.replace(hashOf(list[at].id));
  }

  q("case-close").addEventListener("click", close);
  q("case-prev").addEventListener("click", function () { step(-1); });
  q("case-next").addEventListener("click", function () { step(1); });
  document.addEventListener("keydown", function (event) {
    if (view.hidden) return;
    var typing = /^(INPUT|SELECT|TEXTAREA)$/.test((event.target && event.target.tagName) || "");
    if (event.key === "Escape") close();
    else if (!typing && event.key === "ArrowLeft") step(-1);
    else if (!typing && event.key === "ArrowRight") step(1);
  });
  window.addEventListener("hashchange", function () { route(); });
  if (parsed()) { landed = true; route(); }

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
