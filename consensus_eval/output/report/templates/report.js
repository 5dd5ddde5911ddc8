"use strict";
/* report.html's only script, allowed by its hash in the page's Content-Security-Policy.
   Sorts, filters and searches the case table, and builds a case's drill-down from the embedded
   data when it is opened. It writes text nodes only (textContent, never innerHTML), fetches
   nothing and stores nothing. */
(function () {
  var meta = JSON.parse(document.getElementById("report-meta").textContent);
  var L = meta.labels, J = meta.judges;
  var table = document.getElementById("case-table");
  if (!table) { return; }
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var ncols = table.tHead.rows[0].cells.length;
  var chunks = {};
  var controls = document.getElementById("controls");
  controls.hidden = false;   /* the controls work with this script only: its placeholder names the reasons */
  var q = document.getElementById("f-text"), fs = document.getElementById("f-status"),
      ff = document.getElementById("f-flag"), fk = document.getElementById("f-stars"),
      fj = document.getElementById("f-judge"), fc = document.getElementById("f-cat"),
      shown = document.getElementById("f-count");
  q.placeholder = L.search_placeholder_reasons;
  q.setAttribute("aria-label", L.search_placeholder_reasons);

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) { e.className = cls; }
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    return e;
  }
  /* scores are averages (of judges, of runs): one decimal; points keep two */
  function num(x) { return x === null || x === undefined ? "\u2013" : String(Math.round(x * 10) / 10); }
  function pts(x) { return String(Math.round(x * 100) / 100); }
  function stars(k) { return k ? "\u2605".repeat(k) + "\u2606".repeat(5 - k) : "\u2013"; }
  function has(list, v) { return (" " + list + " ").indexOf(" " + v + " ") >= 0; }

  /* ---------------------------------------------------------------- filter, search, sort */
  /* case id -> its judges' reasons and comments, lower-cased: read from the drill-down payloads the page
     embeds, inflated once, at the first search (no reason text is added to the rows: the page stays small) */
  var reasons = null, reasonsLoading = false;
  function reasonText(p) {
    var out = [];
    p.dims.forEach(function (d) {
      d.v.forEach(function (v) {
        (v.c || []).forEach(function (c) { out.push(c); });
        (v.gr || []).forEach(function (g) { g.d.forEach(function (x) { if (x.why) { out.push(x.why); } }); });
      });
    });
    return out.join("\n").toLowerCase();
  }
  function loadReasons() {
    if (reasonsLoading || typeof DecompressionStream === "undefined") { return; }
    reasonsLoading = true;
    var keys = {};
    Object.keys(meta.index).forEach(function (id) { keys[meta.index[id]] = true; });
    Promise.all(Object.keys(keys).map(function (k) {
      /* a chunk already opened is read from its cache; the others are inflated here and not kept */
      return (chunks[k] || inflate(k)).then(function (list) {
        return list.map(function (p) { return [p.id, reasonText(p)]; });
      });
    })).then(function (parts) {
      var found = {};
      parts.forEach(function (part) { part.forEach(function (x) { found[x[0]] = x[1]; }); });
      reasons = found;
      if (q.value.trim()) { applyFilters(true); }
    });
  }
  function applyFilters(keepOpen) {
    var text = q.value.trim().toLowerCase(), n = 0;
    /* the deduction types whose name holds the text: a row matches when its judges deducted one of them */
    var typeHits = text ? (meta.types || []).map(function (name, i) {
      return name.toLowerCase().indexOf(text) >= 0 ? String(i) : null; }).filter(function (x) { return x; }) : [];
    if (text && reasons === null) { loadReasons(); }
    if (keepOpen !== true) { closeDrill(); }
    rows.forEach(function (r) {
      var d = r.dataset, ok = true, cl = r.classList;
      if (text && r.textContent.toLowerCase().indexOf(text) < 0
          && !typeHits.some(function (i) { return has(d.t || "", i); })
          && !(reasons && (reasons[d.id] || "").indexOf(text) >= 0)) {
        ok = false;   /* the row's text, else its deductions' types, else its judges' reasons */
      }
      if (ok && fs.value && d.s !== fs.value) { ok = false; }
      if (ok && ff.value === "review" && !cl.contains("review")) { ok = false; }
      if (ok && ff.value === "flagged" && !cl.contains("flag")) { ok = false; }
      if (ok && ff.value === "none" && (cl.contains("flag") || cl.contains("review"))) { ok = false; }
      if (ok && fk.value && !(Number(d.k) <= Number(fk.value))) { ok = false; }
      if (ok && fj.value && !has(d.j || "", fj.value)) { ok = false; }
      if (ok && fc.value && !has(d.c || "", fc.value)) { ok = false; }
      r.hidden = !ok;
      if (ok) { n += 1; }
    });
    shown.textContent = L.showing.replace("{n}", n).replace("{total}", rows.length);
  }
  [q, fs, ff, fk, fj, fc].forEach(function (c) { c.addEventListener("input", applyFilters); });
  document.getElementById("f-reset").addEventListener("click", function () {
    q.value = ""; [fs, ff, fk, fj, fc].forEach(function (c) { c.value = ""; }); applyFilters();
  });
  var reviewLink = document.getElementById("show-review");
  if (reviewLink) {
    reviewLink.addEventListener("click", function () { ff.value = "review"; applyFilters(); });
  }

  var sortCol = -1, sortDir = 1;
  Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
    var b = th.querySelector("button");
    if (!b) { return; }
    th.style.cursor = "pointer";
    th.addEventListener("click", function () {   /* the whole header cell sorts, not only its word */
      sortDir = sortCol === i ? -sortDir : (th.classList.contains("n") ? -1 : 1);
      sortCol = i;
      closeDrill();
      var keyed = rows.map(function (r, k) {
        var v = r.cells[i].textContent.trim(), x = parseFloat(v);
        return { r: r, k: k, v: isNaN(x) ? v : x, isnum: !isNaN(x) };
      });
      keyed.sort(function (a, b) {
        if (a.isnum !== b.isnum) { return a.isnum ? -1 : 1; }
        if (a.v < b.v) { return -sortDir; }
        if (a.v > b.v) { return sortDir; }
        return a.k - b.k;
      });
      rows = keyed.map(function (o) { return o.r; });
      rows.forEach(function (r) { tbody.appendChild(r); });
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
    });
  });

  /* ---------------------------------------------------------------- drill-downs */
  function b64bytes(s) {
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i += 1) { out[i] = bin.charCodeAt(i); }
    return out;
  }
  function inflate(k) {
    var raw = document.getElementById("dd-" + k).textContent.trim();
    var stream = new Blob([b64bytes(raw)]).stream().pipeThrough(new DecompressionStream("gzip"));
    return new Response(stream).text().then(JSON.parse);
  }
  function chunk(k) {
    if (!chunks[k]) { chunks[k] = inflate(k); }
    return chunks[k];
  }
  function closeDrill() {
    var open = tbody.querySelectorAll("tr.drill");
    Array.prototype.forEach.call(open, function (r) {
      var prev = r.previousElementSibling;
      if (prev) { prev.classList.remove("open"); }
      r.remove();
    });
  }
  /* pages { */
  /* a paged report: a case of another page (a link here, or to report.html#case-<id> from outside) is opened
     on its page file, looked up in the list of the other pages' anchors (one more chunk, inflated on demand) */
  function toPage(id) {
    if (typeof DecompressionStream === "undefined") { return; }
    chunk(meta.pages.chunk).then(function (later) {
      for (var k = 0; k < later.length; k += 1) {
        if (later[k].indexOf(id) >= 0) { location.replace(meta.pages.files[k].split("#")[0] + "#" + id); return; }
      }
    });
  }
  /* } pages */
  function openCase(id, scroll) {
    var row = document.getElementById(id);
    /* pages { */
    if (!row && meta.pages) { toPage(id); return; }
    /* } pages */
    if (!row || row.tagName !== "TR") { return; }
    if (row.hidden) { document.getElementById("f-reset").click(); }
    closeDrill();
    var k = meta.index[row.dataset.id];
    var tr = el("tr", "drill"), td = el("td");
    td.colSpan = ncols;
    td.appendChild(el("p", "muted", L.loading));
    tr.appendChild(td);
    row.after(tr);
    row.classList.add("open");
    if (typeof DecompressionStream === "undefined") {
      td.textContent = L.no_stream;
      return;
    }
    chunk(k).then(function (list) {
      var p = list.filter(function (x) { return x.id === row.dataset.id; })[0];
      td.textContent = "";
      td.appendChild(render(p));
      if (scroll) { row.scrollIntoView({ block: "start" }); }
    });
  }
  function fromHash(scroll) {
    var h = decodeURIComponent(location.hash.slice(1));
    if (h.indexOf("case-") === 0) { openCase(h, scroll); }
  }
  window.addEventListener("hashchange", function () { fromHash(true); });
  tbody.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest("a.case");
    if (!a) { return; }
    var row = a.closest("tr");
    if (row.classList.contains("open")) { ev.preventDefault(); closeDrill(); history.replaceState(null, "", "#cases"); }
    else if (location.hash === "#" + row.id) { ev.preventDefault(); openCase(row.id, false); }
  });

  function badge(cls, text, title) {
    var b = el("span", "badge " + cls, text);
    if (title) { b.title = title; }
    return b;
  }
  function runsLabel(r, n) {
    if (r.length === n) { return L.x_runs.replace("{n}", n); }
    var shown = r.map(function (k) { return k + 1; }).join(", ");
    return (r.length === 1 ? L.run_of : L.runs_of).replace("{r}", shown).replace("{n}", n);
  }
  function render(p) {
    var box = el("div", "dd"), a = p.a, n = 0, marks = [[], []];
    function deduction(x) {
      n += 1;
      var li = el("li", "m-" + x.m);
      li.id = "d-" + a + "-" + n;
      li.appendChild(el("span", null, (x.pen ? L.fixed_penalty : x.c) + " / " + x.t + " "));
      li.appendChild(el("span", "pts", "\u2212" + pts(x.p)));
      if (x.once) { li.appendChild(badge("once", L.applied_once)); }
      else if (x.x) { li.appendChild(badge("runs", "\u00d7" + x.x)); }
      if (x.m === "none") { li.appendChild(badge("m-none", L.singleton)); }
      else if (x.m === "category") { li.appendChild(badge("m-category", L.same_category, (x.mb || []).join(", "))); }
      else if (x.m === "type") { li.appendChild(badge("m-type", L.shared, (x.mb || []).join(", "))); }
      if (x.g === "not_found") { li.appendChild(badge("ungrounded", L.not_found)); }
      else if (x.g === "fuzzy") { li.appendChild(badge("fuzzy", L.fuzzy.replace("{s}", num(x.gs)))); }
      if (x.hv) {
        Object.keys(x.hv).forEach(function (r) {
          li.appendChild(badge("hv " + x.hv[r], r + ": " + (L["verdict_" + x.hv[r]] || x.hv[r])));
        });
      }
      if (x.rv) {   /* the adjudicator's reference verdict, where the reviewers disagreed */
        li.appendChild(badge("hv rv " + x.rv, L.verdict_reference.replace("{names}", ((p.h || {}).adj || []).join(", "))
          + ": " + (L["verdict_" + x.rv] || x.rv)));
      }
      if (x.ev) {
        var bq = el("blockquote");
        if (x.sp && x.sp.length) {
          var link = el("a", "ev", x.ev);
          link.href = "#q-" + a + "-" + n;
          link.title = L.to_quote;
          bq.appendChild(link);
          var me = n;
          x.sp.forEach(function (s) { marks[s[0]].push({ s: s[1], e: s[2], n: me, sec: s[3] }); });
        } else { bq.textContent = x.ev; }
        li.appendChild(bq);
      }
      if (x.why) { li.appendChild(el("p", "reason", x.why)); }
      return li;
    }
    var head = el("p", "muted");
    head.appendChild(el("span", "status " + p.st, L["status_" + p.st] || p.st));
    var parts = [" " + L.total + " " + num(p.tot)];
    var jt = Object.keys(p.jt).map(function (j) { return J[j] + " " + num(p.jt[j]); });
    if (jt.length) { parts.push(L.judge_totals + ": " + jt.join(", ")); }
    /* whose human score is shown: the adjudicator's reference, one reviewer's own, or the mean of several */
    function whose(key) {
      var w = (p.h.w || {})[key];
      if (!w) { return ""; }
      return L["human_whose_" + w[0]].replace("{names}", w[1].join(L.name_sep));
    }
    var dimName = {};
    p.dims.forEach(function (d) { dimName[d.id] = d.n; });
    if (p.h && p.h.m.total !== undefined) { parts.push(L.human_vs_panel.replace("{human}", num(p.h.m.total)).replace("{whose}", whose("total")).replace("{panel}", num(p.tot))); }
    if (p.fl.length) { parts.push(L.flags + ": " + p.fl.join("; ")); }
    head.appendChild(document.createTextNode(parts.join(" \u00b7 ")));
    box.appendChild(head);
    if (p.err) {
      Object.keys(p.err).forEach(function (j) { box.appendChild(el("p", "err", j + ": " + p.err[j].join("; "))); });
    }
    /* kinds { */
    function kindDim(d) {   /* a likert dimension: each judge's levels; a criteria one: criterion x judge */
      if (d.kd === "likert") {
        var lgrid = el("div", "jgrid");
        d.v.forEach(function (v) {
          var col = el("div", "jcol s" + (v.k || 0));
          var jh = el("div", "jhead", (J[v.j] || "?") + " \u00b7 " + num(v.s) + " ");
          if (v.k) { jh.appendChild(el("span", "stars", stars(v.k))); }
          col.appendChild(jh);
          if (!v.ok) { col.appendChild(el("p", "err", L.failed + ": " + (v.e || []).join("; "))); }
          (v.rt || []).forEach(function (r) {
            if (v.n > 1) { col.appendChild(el("div", "rungroup", runsLabel([r[0]], v.n))); }
            col.appendChild(el("p", "level", L.level.replace("{level}", r[1]).replace("{anchor}", r[2])));
            r[3].forEach(function (q) { col.appendChild(el("blockquote", null, q)); });
          });
          (v.c || []).forEach(function (c) { col.appendChild(el("p", "reason", L.comment + ": " + c)); });
          lgrid.appendChild(col);
        });
        box.appendChild(lgrid);
        return;
      }
      var tb = el("table", "crit"), hr = el("tr");
      [L.col_criterion, L.col_points].forEach(function (x) { hr.appendChild(el("th", null, x)); });
      d.v.forEach(function (v) { hr.appendChild(el("th", null, (J[v.j] || "?") + " \u00b7 " + num(v.s))); });
      var revs = Object.keys(d.hc || {});
      revs.forEach(function (r) { hr.appendChild(el("th", null, r)); });
      tb.appendChild(hr);
      (d.cr || []).forEach(function (c) {
        var tr = el("tr", c[3] ? "split" : null), first = el("td", null, c[0] + ": " + c[1] + " ");
        if (c[3]) { first.appendChild(badge("m-none", L.split)); }
        tr.appendChild(first);
        tr.appendChild(el("td", "n", pts(c[2])));
        d.v.forEach(function (v) {
          var votes = c[4][String(v.j)] || [];
          tr.appendChild(el("td", null, votes.map(function (m) { return m ? L.met : L.not_met; }).join(" / ") || "\u2013"));
        });
        revs.forEach(function (r) {
          var m = d.hc[r][c[0]];
          tr.appendChild(el("td", null, m === undefined ? "\u2013" : (m ? L.met : L.not_met)));
        });
        tb.appendChild(tr);
      });
      box.appendChild(tb);
    }
    /* } kinds */
    p.dims.forEach(function (d) {
      var h = el("h4", null, d.n + " ");
      var sub = L.dim_sub.replace("{max}", num(d.max)).replace("{panel}", num(d.p)).replace("{gap}", d.g);
      /* kinds { */
      if (d.kd === "likert") { sub = L.dim_sub_likert.replace("{low}", (d.lv || [])[0]).replace("{max}", num(d.max)).replace("{panel}", num(d.p)); }
      if (d.kd === "criteria") { sub = L.dim_sub_criteria.replace("{panel}", num(d.p)); }
      /* } kinds */
      if (p.h && p.h.m[d.id] !== undefined) {
        sub += " \u00b7 " + L.human_dim.replace("{value}", num(p.h.m[d.id])).replace("{whose}", whose(d.id));
        var per = Object.keys(p.h.s).filter(function (r) { return p.h.s[r][d.id] !== undefined; });
        if (per.length > 1) { sub += " \u00b7 " + per.map(function (r) { return r + " " + num(p.h.s[r][d.id]); }).join(L.name_sep); }
      }
      h.appendChild(el("span", "muted", sub));
      box.appendChild(h);
      Object.keys((p.h && p.h.rv) || {}).forEach(function (r) {   /* a blind score revised after the reveal */
        if (p.h.rv[r][d.id] === undefined) { return; }
        box.appendChild(el("p", "muted revised", L.human_revised.replace("{name}", r).replace("{dim}", d.n)
          .replace("{blind}", num(p.h.s[r][d.id])).replace("{value}", num(p.h.rv[r][d.id]))));
      });
      /* kinds { */
      if (d.q && d.kd) { box.appendChild(el("p", "muted", L.quiet_kinds)); return; }
      if (d.kd) { kindDim(d); return; }
      /* } kinds */
      if (d.q) { box.appendChild(el("p", "muted", L.quiet)); return; }
      var grid = el("div", "jgrid");
      d.v.forEach(function (v) {
        var col = el("div", "jcol s" + (v.k || 0));
        var jh = el("div", "jhead", (J[v.j] || "?") + " \u00b7 " + num(v.s) + " ");
        jh.appendChild(el("span", "stars", stars(v.k)));
        col.appendChild(jh);
        var lines = 0;
        (v.gr || []).forEach(function (g) { lines += g.d.length; });
        if (!v.ok) { col.appendChild(el("p", "err", L.failed + ": " + (v.e || []).join("; "))); }
        else if (!lines) { col.appendChild(el("p", "muted", L.no_deduction)); }
        else {
          (v.gr || []).forEach(function (g) {
            if (g.n > 1) { col.appendChild(el("div", "rungroup", runsLabel(g.r, g.n))); }
            var ul = el("ul", "deds");
            g.d.forEach(function (x) { ul.appendChild(deduction(x)); });
            col.appendChild(ul);
          });
        }
        if (v.ok && v.nf) { col.appendChild(el("p", "err", L.failed_runs.replace("{n}", v.nf) + ": " + (v.e || []).join("; "))); }
        (v.c || []).forEach(function (c) { col.appendChild(el("p", "reason", L.comment + ": " + c)); });
        grid.appendChild(col);
      });
      box.appendChild(grid);
    });
    if (p.mm.length) {
      box.appendChild(el("h4", null, L.claimed_vs_derived));
      var ml = el("ul");
      p.mm.forEach(function (m) {
        ml.appendChild(el("li", null, L.mismatch.replace("{judge}", J[m[0]]).replace("{run}", m[1]).replace("{dim}", m[2])
          .replace("{claimed}", num(m[3])).replace("{cstars}", m[4] === null ? "\u2013" : m[4])
          .replace("{derived}", num(m[5])).replace("{dstars}", m[6])));
      });
      box.appendChild(ml);
    }
    if (p.h && p.h.cm.length) {
      box.appendChild(el("h4", null, L.human_comments));
      var cl = el("ul");
      p.h.cm.forEach(function (c) {
        cl.appendChild(el("li", null, (c[1] ? L.human_comment_line.replace("{dim}", dimName[c[1]] || c[1]) : L.human_comment_case)
          .replace("{name}", c[0]).replace("{text}", c[2])));
      });
      box.appendChild(cl);
    }
    if (p.h && p.h.ad && p.h.ad.length) {
      box.appendChild(el("h4", null, L.human_added));
      var al = el("ul", "added");
      p.h.ad.forEach(function (x) {
        al.appendChild(el("li", null, L.human_comment_line.replace("{name}", x[0]).replace("{dim}", dimName[x[1]] || x[1])
          .replace("{text}", x[2] + " \u2212" + num(x[3]) + (x[4] ? " \u00ab" + x[4] + "\u00bb" : "") + (x[5] ? " " + x[5] : ""))));
      });
      box.appendChild(al);
    }
    box.appendChild(el("h4", null, L.record));
    box.appendChild(marked("record", p.rec, marks[0], a));
    box.appendChild(el("h4", null, L.conversation));
    box.appendChild(marked("conversation", p.conv, marks[1], a));
    return box;
  }
  /* the text with every quoted span in <mark>; a mark links back to its (first) deduction */
  function marked(cls, text, spans, a) {
    var pre = el("pre", cls), cuts = [0, text.length], firstSeen = {};
    spans.forEach(function (s) { cuts.push(s.s, s.e); });
    cuts = cuts.filter(function (c, i, all) { return c >= 0 && c <= text.length && all.indexOf(c) === i; })
      .sort(function (x, y) { return x - y; });
    for (var i = 0; i + 1 < cuts.length; i += 1) {
      var lo = cuts[i], hi = cuts[i + 1], piece = text.slice(lo, hi);
      var over = spans.filter(function (s) { return s.s <= lo && s.e >= hi && s.e > s.s; });
      if (!over.length) { pre.appendChild(document.createTextNode(piece)); continue; }
      var m = el("mark");
      over.forEach(function (s) {
        if (!firstSeen[s.n]) {
          firstSeen[s.n] = true;
          var target = el("span", "qa");
          target.id = "q-" + a + "-" + s.n;
          m.appendChild(target);
        }
      });
      var back = el("a", null, piece);
      back.href = "#d-" + a + "-" + over[0].n;
      back.title = L.to_deduction + (over[0].sec ? " \u00b7 " + over[0].sec : "");
      m.appendChild(back);
      pre.appendChild(m);
    }
    return pre;
  }

  applyFilters();
  fromHash(true);
})();
