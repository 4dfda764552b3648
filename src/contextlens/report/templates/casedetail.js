/* A case's page, shared by the run report and the comparison: a case's texts and chunks (or
   turns) with each metric's evidence laid over them, and each metric's result, reason,
   tables and facts. Every text goes in through textContent. */
CL.detail = (function () {
  "use strict";
  var el = CL.el;
  var STATUS_TEXT = { pass: "pass", below: "below pass mark", failed: "failed", scored: "scored",
                      "not applicable": "not applicable", "not run": "not run" };
  var TONE = { pass: "good", below: "warn", failed: "bad", scored: "",
               "not applicable": "", "not run": "warn" };
  var NO_SCORE = { failed: "failed", "not applicable": "n/a", "not run": "not run" };
  var RANK = { bad: 4, warn: 3, good: 2, accent: 1 };

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

  function chunks(detail, results, texts, side) {
    var list = detail.chunks || [];
    if (!list.length) return null;
    return el("div", { className: "field chunks" }, [
      el("h3", { text: "Retrieved chunks (" + list.length + "), best first" })
    ].concat(list.map(function (text, i) {
      return el("div", { className: "chunk", "data-role": "chunk", "data-chunk": String(i), "data-side": side || null }, [
        chunkHead(detail, results, i),
        marked(text, marksOn(results, "chunk:" + i, texts)),
        chunkNotes(results, i)
      ]);
    })));
  }

  /* The tool calls of a case or a turn, each with its input and its output: evidence for
     the claim metrics beside the chunks. */
  function toolCalls(list) {
    if (!list || !list.length) return null;
    return el("div", { className: "field tools", "data-role": "tool-calls" }, [
      el("h4", { text: "Tool calls (" + list.length + ")" })
    ].concat(list.map(function (call) {
      return el("div", { className: "chunk", "data-role": "tool-call", "data-tool": call.label }, [
        el("div", { className: "chunk-head" }, [el("b", { text: call.label }),
          call.input ? el("span", { className: "muted", text: call.input }) : null]),
        el("div", { className: "text", text: call.output || "(no output)" })
      ]);
    })));
  }

  /* A turn's own retrieved chunks, each with the turn metrics' notes on it. */
  function turnChunks(turn, results) {
    var list = turn.chunks || [];
    if (!list.length) return null;
    var own = results.map(function (r) {
      return { metric: r.metric, chunks: ((r.turns || {})[turn.qa_id] || {}).chunks };
    });
    return el("div", { className: "field chunks" }, [
      el("h4", { text: "Retrieved chunks (" + list.length + "), best first" })
    ].concat(list.map(function (text, i) {
      return el("div", { className: "chunk", "data-role": "turn-chunk", "data-chunk": String(i) }, [
        el("div", { className: "chunk-head" }, [el("b", { text: "#" + (i + 1) })]),
        el("div", { className: "text", text: text }),
        chunkNotes(own, i)
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
          block("observation", turn.observation, null, marksOn(results, key + "observation", texts)),
          turnChunks(turn, results),
          toolCalls(turn.tools)
        ].concat(verdicts));
      })));
  }

  function tableOf(table, side) {
    var head = el("tr", {}, table.columns.map(function (c) { return el("th", { text: c }); }));
    var body = table.rows.map(function (cells, r) {
      return el("tr", { className: table.tones[r] ? "tone-" + table.tones[r] : null }, cells.map(function (c) {
        if (c === null || c === undefined) return el("td", { text: "" });
        if (typeof c !== "object") return el("td", { text: String(c) });
        if (c.chunk !== undefined && c.chunk !== null) {
          var go = el("button", { type: "button", className: "link", text: c.text, title: "show this chunk" });
          go.addEventListener("click", function () { showChunk(go, c.chunk, side); });
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

  /* Scroll to chunk `index` (of run `side` in a comparison) of the case `from` is in. */
  function showChunk(from, index, side) {
    var root = from.closest("[data-case-root]") || document;
    var card = root.querySelector("[data-role=chunk][data-chunk='" + index + "']" +
                                  (side ? "[data-side='" + side + "']" : ""));
    if (!card) return;
    card.scrollIntoView({ block: "center" });
    card.classList.remove("flash");
    void card.offsetWidth;
    card.classList.add("flash");
  }

  function metricResult(result, focused, side) {
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
        result.triage ? tag("decided by " + result.triage) : null,
        result.spread !== null && result.spread !== undefined ? tag("± " + CL.score(result.spread) + " over repeats") : null
      ]),
      result.reason ? el("div", { className: "why", text: result.reason }) : null,
      result.why_not ? el("div", { className: "why", "data-role": "not-scored", text: result.why_not }) : null,
      result.error ? el("div", { className: "error", "data-role": "failure-reason", text: result.error }) : null,
      result.raw_reply ? el("details", { "data-role": "raw-reply" }, [
        el("summary", { text: "the judge's last reply" }), el("pre", { text: result.raw_reply })]) : null
    ].concat((result.tables || []).map(function (t) { return tableOf(t, side); }))
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
        var target = resultNode(go.closest("[data-case-root]") || document, result.metric);
        if (target) target.scrollIntoView({ block: "start" });
      });
      return go;
    }));
  }

  function resultNode(root, metric) {
    var found = root.querySelectorAll("[data-role=metric-result]");
    for (var i = 0; i < found.length; i++) {
      if (found[i].getAttribute("data-metric") === metric) return found[i];
    }
    return null;
  }

  /* The texts a mark can be on: a field of the case, a chunk (chunk:I), a turn's field
     (turn:QA:FIELD). */
  function textsOf(detail) {
    var turnsById = {};
    (detail.turns || []).forEach(function (t) { turnsById[t.qa_id] = t; });
    return function (name) {
      if (name.indexOf("chunk:") === 0) return (detail.chunks || [])[parseInt(name.slice(6), 10)];
      if (name.indexOf("turn:") === 0) {
        var cut = name.lastIndexOf(":");
        var turn = turnsById[name.slice(5, cut)];
        return turn ? turn[name.slice(cut + 1)] : null;
      }
      return detail[name];
    };
  }

  /* A case's page in pieces, each metric's evidence laid over its texts: its head, its
     scores, its focused and other metrics' results, its texts by name, its chunks or turns.
     `side` ("a", "b") marks the pieces of one run of a comparison. */
  function parts(detail, focus, side) {
    var results = detail.metrics || [];
    var meta = detail.meta || {};
    var texts = textsOf(detail);
    var out = {
      kind: detail.kind || "",
      head: el("div", { className: "detail-head" }, [el("h2", {}, [el("code", { text: detail.id })])]
        .concat(Object.keys(meta).map(function (key) { return el("span", { className: "chip", text: key + "=" + meta[key] }); }))),
      strip: scoreStrip(results),
      focused: results.filter(function (r) { return r.metric === focus; })
        .map(function (r) { return metricResult(r, true, side); }),
      others: results.filter(function (r) { return r.metric !== focus; }),
      result: function (metric, focused) {
        var found = results.filter(function (r) { return r.metric === metric; })[0];
        return found ? metricResult(found, !!focused, side) : null;
      },
      texts: {},
      body: null
    };
    out.others = out.others.map(function (r) { return { metric: r.metric, node: metricResult(r, false, side) }; });
    if (detail.kind === "session") {
      out.texts.assistant = block("assistant", detail.assistant_id);
      out.texts.system = block("system context", detail.system_context, "system-context", marksOn(results, "system_context", texts));
      out.body = turns(detail, results, texts);
    } else if (detail.kind === "case") {
      out.texts.input = block("input", detail.input, "input");
      out.texts.output = block("answer", detail.output, "output", marksOn(results, "output", texts));
      out.texts.expected = block("expected output", detail.expected, "expected", marksOn(results, "expected", texts));
      out.texts.reference = (detail.reference || []).length ? el("div", { className: "field" }, [el("h4", { text: "reference context" })]
        .concat(detail.reference.map(function (text) { return el("div", { className: "text", text: text }); }))) : null;
      out.texts.tools = toolCalls(detail.tools);
      out.body = chunks(detail, results, texts, side);
    }
    return out;
  }

  var NO_CASES = "This run did not record its cases (no cases.jsonl): only the results are shown.";

  /* A case's page as the run report lays it out. */
  function drillDown(detail, focus) {
    var p = parts(detail, focus);
    var t = p.texts;
    var nodes = [p.head, p.strip].concat(p.focused);
    if (p.kind === "session") {
      nodes.push(el("div", { className: "texts" }, [t.assistant, t.system]));
      nodes.push(p.body);
    } else if (p.kind === "case") {
      nodes.push(el("div", { className: "texts" }, [t.input, t.output, t.expected, t.reference, t.tools]));
      nodes.push(p.body);
    } else {
      nodes.push(el("p", { className: "note", text: NO_CASES }));
    }
    if (p.others.length) {
      nodes.push(el("h3", { className: "results-title", text: p.focused.length ? "The other metrics" : "Each metric" }));
      nodes.push(el("div", { className: "results" }, p.others.map(function (o) { return o.node; })));
    }
    return el("div", { className: "case-detail", "data-role": "case-detail", "data-case": detail.id,
                       "data-case-root": "" }, nodes);
  }

  return { parts: parts, drillDown: drillDown, metricResult: metricResult, block: block, pill: pill,
           tag: tag, STATUS_TEXT: STATUS_TEXT, TONE: TONE, NO_SCORE: NO_SCORE, NO_CASES: NO_CASES };
})();

/* The page a case opens as (#case=ID&metric=NAME), the same on every page that has one:
   opened by a link, closed by Esc or its close button (back where it was opened from, or to
   `home` when the page was landed on), stepped through the listed rows with the arrow keys.
   `o`: `q` (finds a control by its data-role), `view`, `page`, `position`, `home`;
   `find(want)` -> {row, metric} for the parsed hash, or null; `build(row, metric)` -> the
   page's node; `listed(current)` -> the rows stepped through; `hashOf(row, metric)`;
   `where(list, at)` -> the position text; `missing(id)` -> the sentence for an unknown id. */
CL.CaseView = function (o) {
  var current = null, landed = false, returnTo = null;

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

  function shown(node) {
    o.page.textContent = "";
    o.page.appendChild(node);
    if (o.view.hidden) returnTo = document.activeElement;
    o.view.hidden = false;
    document.documentElement.classList.add("case-open");
  }

  function show(row, metric) {
    current = row;
    var list = o.listed(current), at = list.indexOf(row);
    shown(o.build(row, metric));
    o.position.textContent = at === -1 ? "" : o.where(list, at);
    o.q("case-prev").disabled = at <= 0;
    o.q("case-next").disabled = at === -1 || at >= list.length - 1;
    o.view.scrollTop = 0;
    o.q("case-close").focus({ preventScroll: true });
  }

  function missing(id) {
    current = null;
    shown(CL.el("p", { className: "note", "data-role": "case-missing", text: o.missing(id) }));
    o.position.textContent = "";
  }

  function hide() {
    if (o.view.hidden) return;
    o.view.hidden = true;
    o.page.textContent = "";
    current = null;
    document.documentElement.classList.remove("case-open");
    if (returnTo && document.body.contains(returnTo)) returnTo.focus({ preventScroll: true });
  }

  function route() {
    var want = parsed();
    if (!want) { hide(); return; }
    var found = o.find(want);
    if (found) show(found.row, found.metric); else missing(want.case);
  }

  function open(row, metric) {
    landed = false;
    location.hash = o.hashOf(row, metric);
  }

  function close() {
    if (landed) { landed = false; location.replace(o.home); } else history.back();
  }

  function step(by) {
    if (!current) return;
    var list = o.listed(current), at = list.indexOf(current) + by;
    if (at >= 0 && at < list.length) location.replace(o.hashOf(list[at]));
  }

  o.q("case-close").addEventListener("click", close);
  o.q("case-prev").addEventListener("click", function () { step(-1); });
  o.q("case-next").addEventListener("click", function () { step(1); });
  document.addEventListener("keydown", function (event) {
    if (o.view.hidden) return;
    var typing = /^(INPUT|SELECT|TEXTAREA)$/.test((event.target && event.target.tagName) || "");
    if (event.key === "Escape") close();
    else if (!typing && event.key === "ArrowLeft") step(-1);
    else if (!typing && event.key === "ArrowRight") step(1);
  });
  window.addEventListener("hashchange", route);
  if (parsed()) { landed = true; route(); }
  return { open: open };
};

/* A case's link within its page: ``#case=ID`` and, with one, ``&metric=NAME``. */
CL.caseHash = function (id, metric) {
  return "#case=" + encodeURIComponent(id) + (metric ? "&metric=" + encodeURIComponent(metric) : "");
};
