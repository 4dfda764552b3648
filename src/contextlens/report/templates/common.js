/* What the report's pages share: reading their JSON blocks, building elements from text,
   numbers as the page writes them, sortable and pageable tables. Nothing here reads data as
   markup: every text goes in through textContent. */
var CL = (function () {
  "use strict";

  function json(id) {
    var node = document.getElementById(id);
    if (!node) return null;
    try { return JSON.parse(node.textContent || "null"); } catch (err) { return null; }
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    if (attrs) {
      Object.keys(attrs).forEach(function (key) {
        var value = attrs[key];
        if (value === null || value === undefined || value === false) return;
        if (key === "text") node.textContent = String(value);
        else if (key === "className") node.className = value;
        else node.setAttribute(key, value === true ? "" : String(value));
      });
    }
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) return;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  function score(value) {
    return value === null || value === undefined ? "—" : Number(value).toFixed(3);
  }

  function diff(value) {
    if (value === null || value === undefined) return "—";
    return (value >= 0 ? "+" : "") + Number(value).toFixed(3);
  }

  function count(value) {
    return Number(value || 0).toLocaleString("en-US");
  }

  function percent(value) {
    return value === null || value === undefined ? "—" : Math.round(100 * Number(value)) + "%";
  }

  /* A table whose rows are data: shown a page at a time, sorted by a column on demand. */
  function Pager(options) {
    this.body = options.body;
    this.render = options.render;
    this.size = options.size || 100;
    this.status = options.status;
    this.pageLabel = options.pageLabel;
    this.rows = [];
    this.page = 0;
    var self = this;
    if (options.prev) options.prev.addEventListener("click", function () { self.go(self.page - 1); });
    if (options.next) options.next.addEventListener("click", function () { self.go(self.page + 1); });
  }
  Pager.prototype.show = function (rows, total) {
    this.rows = rows;
    this.total = total;
    this.go(0);
  };
  Pager.prototype.pages = function () {
    return Math.max(1, Math.ceil(this.rows.length / this.size));
  };
  Pager.prototype.go = function (page) {
    this.page = Math.min(Math.max(page, 0), this.pages() - 1);
    var start = this.page * this.size;
    var fragment = document.createDocumentFragment();
    var self = this;
    this.rows.slice(start, start + this.size).forEach(function (row) {
      fragment.appendChild(self.render(row));
    });
    this.body.textContent = "";
    this.body.appendChild(fragment);
    if (this.status) {
      this.status.textContent = count(this.rows.length) + " of " + count(this.total) + " shown";
    }
    if (this.pageLabel) {
      this.pageLabel.textContent = "page " + (this.page + 1) + " of " + this.pages();
    }
  };

  function compare(a, b, descending) {
    var missingA = a === null || a === undefined, missingB = b === null || b === undefined;
    if (missingA || missingB) return missingA === missingB ? 0 : missingA ? 1 : -1;
    var order = a < b ? -1 : a > b ? 1 : 0;
    return descending ? -order : order;
  }

  function ready() {
    document.documentElement.setAttribute("data-ready", "1");
  }

  return { json: json, el: el, score: score, diff: diff, count: count, percent: percent, Pager: Pager,
           compare: compare, ready: ready };
})();
