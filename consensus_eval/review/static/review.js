// consensus-eval review: saves every change at once (POST /api/label with the session's CSRF token),
// highlights a deduction's evidence in the texts, and the keyboard shortcuts listed on each page.
// Plain JavaScript, no dependency; text from the page is only ever set through textContent.
"use strict";

(function () {
  const csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  const texts = JSON.parse(document.body.dataset.i18n || "{}");
  const tr = (key, values) => (texts[key] || key).replace(/\{(\w+)\}/g, (m, k) => (values && k in values ? values[k] : m));
  const status = document.getElementById("save-status");
  const progress = document.getElementById("progress");

  function say(text, cls) {
    if (!status) return;
    status.textContent = text;
    status.className = "save-status " + (cls || "");
  }

  function staleBanner() {
    if (document.getElementById("stale-banner")) return;
    const b = document.createElement("div");
    b.id = "stale-banner";
    b.className = "stale-banner";
    b.setAttribute("role", "alert");
    b.textContent = tr("js_session_lost");
    document.body.insertBefore(b, document.body.firstChild);
  }

  let pending = 0;
  async function save(action, keepalive) {
    pending += 1;
    say(tr("js_saving"), "saving");
    try {
      const resp = await fetch("/api/label", {
        method: "POST", credentials: "same-origin", keepalive: !!keepalive,
        headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
        body: JSON.stringify(action),
      });
      const reply = await resp.json().catch(() => ({}));
      if (!resp.ok) {
        if (resp.status === 403) {
          // the server restarted (sessions live in its memory) or the link is no longer valid: say so plainly,
          // in a banner, and leave everything typed on the page as it is (nothing is cleared or reloaded)
          staleBanner();
          say(tr("js_not_saved", {why: tr("js_session_lost_short")}), "error");
        } else {
          say(tr("js_not_saved", {why: reply.error || resp.status}), "error");
        }
        return null;
      }
      if (progress && reply.progress) progress.textContent = reply.progress;
      const state = document.getElementById("case-state");
      if (state && reply.state) {
        state.textContent = tr(reply.state === "todo" ? "state_todo" : "s_" + reply.state);
        state.className = "state state-" + reply.state;
      }
      say(tr("js_saved", {time: new Date().toLocaleTimeString()}), "saved");
      return reply;
    } catch (e) {
      say(tr("js_not_saved", {why: tr("js_unreachable")}), "error");
      return null;
    } finally {
      pending -= 1;
    }
  }
  window.addEventListener("beforeunload", (e) => { if (pending > 0) e.preventDefault(); });

  function typing(el) {   // a level picked on a likert scale (a radio) leaves the shortcuts on
    const choice = el && el.tagName === "INPUT" && (el.type === "radio" || el.type === "checkbox");
    return el && !choice && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }

  // text fields save after a pause in typing; anything still waiting is sent when the page goes away
  const waiting = new Map();
  function debounced(fn, ms) {
    let t = null;
    const run = () => { clearTimeout(t); waiting.delete(run); fn(); };
    return () => { clearTimeout(t); waiting.set(run, fn); t = setTimeout(run, ms); };
  }
  window.addEventListener("pagehide", () => {
    waiting.forEach((fn, run) => { waiting.delete(run); fn(true); });
  });

  // ------------------------------------------------------------------ queue page
  const queue = document.getElementById("queue");
  if (queue) {
    const rows = Array.from(queue.querySelectorAll("tbody tr.row"));
    let at = -1;
    const select = (i) => {
      if (!rows.length) return;
      at = Math.max(0, Math.min(rows.length - 1, i));
      rows.forEach((r, k) => r.classList.toggle("selected", k === at));
      rows[at].focus();
      rows[at].scrollIntoView({block: "nearest"});
    };
    rows.forEach((r, k) => r.addEventListener("click", (e) => {
      if (e.target.tagName !== "A") { at = k; window.location.href = r.dataset.href; }
    }));
    document.addEventListener("keydown", (e) => {
      if (typing(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
      if (e.key === "j" || e.key === "ArrowDown") { select(at + 1); e.preventDefault(); }
      else if (e.key === "k" || e.key === "ArrowUp") { select(at - 1); e.preventDefault(); }
      else if ((e.key === "Enter" || e.key === "o") && at >= 0) { window.location.href = rows[at].dataset.href; }
    });
    const filters = document.getElementById("filters");
    if (filters) filters.querySelectorAll("select").forEach((s) => s.addEventListener("change", () => filters.submit()));
  }

  // ------------------------------------------------------------------ case page
  const root = document.getElementById("case");
  if (!root) return;
  const caseRank = parseInt(root.dataset.case, 10);
  // the judges' deductions, and a likert judge's rating or a criterion (their evidence is marked in the texts too)
  const deds = Array.from(document.querySelectorAll("article.ded, article.rating, tr.criterion"));
  let current = null;

  function highlight(ded, scroll) {
    document.querySelectorAll("mark.ev.active").forEach((m) => m.classList.remove("active"));
    deds.forEach((d) => d.classList.toggle("selected", d === ded));
    current = ded;
    if (!ded) return;
    const n = ded.dataset.n;
    const marks = Array.from(document.querySelectorAll("mark.ev")).filter((m) => m.dataset.ev.split(" ").includes(n));
    marks.forEach((m) => m.classList.add("active"));
    if (scroll && marks.length) {
      // the first span in each pane that has one
      const seen = new Set();
      marks.forEach((m) => {
        const pane = m.closest(".text");
        if (pane && !seen.has(pane)) {
          // scroll the text's own pane only (the page stays where the reviewer is)
          seen.add(pane);
          pane.scrollTo({top: Math.max(0, m.offsetTop - pane.clientHeight / 2), behavior: "smooth"});
        }
      });
    }
  }

  deds.forEach((ded) => {
    ded.addEventListener("mouseenter", () => highlight(ded, true));
    ded.addEventListener("click", (e) => { if (!e.target.closest("button, input")) highlight(ded, true); });
    ded.addEventListener("focusin", () => { if (current !== ded) highlight(ded, true); });
  });
  // a click on a highlighted span selects its deduction
  document.querySelectorAll("mark.ev").forEach((m) => m.addEventListener("click", () => {
    const ded = document.getElementById("ded-" + m.dataset.ev.split(" ")[0]);
    if (ded) { highlight(ded, false); ded.scrollIntoView({block: "center", behavior: "smooth"}); }
  }));

  function dedState(ded) {
    const on = ded.querySelector("button.verdict[aria-pressed=true]");
    return {op: "verdict", case: caseRank, ids: JSON.parse(ded.dataset.ids),
            verdict: on ? on.dataset.verdict : null, comment: ded.querySelector(".ded-comment").value};
  }

  function setVerdict(ded, verdict) {
    ded.querySelectorAll("button.verdict").forEach((b) => {
      const on = b.dataset.verdict === verdict && b.getAttribute("aria-pressed") !== "true";
      b.setAttribute("aria-pressed", on ? "true" : "false");
    });
    return save(dedState(ded));
  }

  deds.filter((ded) => ded.matches("article.ded")).forEach((ded) => {
    ded.querySelectorAll("button.verdict").forEach((b) => b.addEventListener("click", () => {
      highlight(ded, false);
      setVerdict(ded, b.dataset.verdict);
    }));
    const input = ded.querySelector(".ded-comment");
    const later = debounced((keep) => save(dedState(ded), keep), 700);
    input.addEventListener("input", later);
    input.addEventListener("change", () => save(dedState(ded)));
  });

  document.querySelectorAll("input.score").forEach((input) => {
    // typed by the reviewer: their own score, even before its save has answered
    input.addEventListener("input", () => { input.dataset.edited = "yes"; });
    input.addEventListener("change", async () => {
      const reply = await save({op: "score", case: caseRank, dimension: input.dataset.dim, value: input.value === "" ? null : Number(input.value)});
      if (reply) {
        input.dataset.mine = input.value === "" ? "no" : "yes";
        const note = input.closest(".your-score").querySelector(".score-note");
        note.textContent = tr(input.value === "" ? "note_none" : "note_mine");
      }
    });
  });

  // a likert dimension: the level picked on the scale is the reviewer's own score (the hidden field carries it,
  // so "Confirm scores" treats it as any typed score)
  document.querySelectorAll("input.level").forEach((radio) => radio.addEventListener("change", async () => {
    const box = radio.closest(".your-score");
    const input = box.querySelector("input.score");
    input.value = radio.value;
    input.dataset.edited = "yes";
    const reply = await save({op: "score", case: caseRank, dimension: radio.dataset.dim, value: Number(radio.value)});
    if (reply) {
      input.dataset.mine = "yes";
      box.querySelector(".score-note").textContent = tr("note_mine");
    }
  }));

  // a criteria dimension: met / not met per criterion (pressed again: withdrawn), with the reviewer's evidence
  function critState(row) {
    const on = row.querySelector("button.crit[aria-pressed=true]");
    return {op: "criterion", case: caseRank, dimension: row.dataset.dim, criterion: row.dataset.criterion,
            met: on ? on.dataset.met === "true" : null, evidence: row.querySelector(".crit-evidence").value};
  }
  document.querySelectorAll("tr.criterion").forEach((row) => {
    row.querySelectorAll("button.crit").forEach((b) => b.addEventListener("click", async () => {
      const press = b.getAttribute("aria-pressed") !== "true";
      row.querySelectorAll("button.crit").forEach((x) => x.setAttribute("aria-pressed", x === b && press ? "true" : "false"));
      if (await save(critState(row))) {
        row.dataset.origin = press ? "own" : "";
        row.querySelector(".crit-note").textContent = "";
      }
    }));
    const ev = row.querySelector(".crit-evidence");
    const later = debounced((keep) => { if (row.querySelector("button.crit[aria-pressed=true]")) save(critState(row), keep); }, 700);
    ev.addEventListener("input", later);
    ev.addEventListener("change", () => { if (row.querySelector("button.crit[aria-pressed=true]")) save(critState(row)); });
  });

  // "Confirm scores": a score the reviewer entered is theirs; a field still showing the panel's score,
  // untouched, is stored as "accepted the panel's score", never as the reviewer's own.
  async function confirmScores() {
    const scores = {};
    const accepted = [];
    let missing = false;
    document.querySelectorAll("input.score").forEach((input) => {
      if (input.value === "") missing = true;
      else if (input.dataset.mine === "yes" || input.dataset.edited === "yes") scores[input.dataset.dim] = Number(input.value);
      else accepted.push(input.dataset.dim);
    });
    if (missing) { say(tr("js_not_saved", {why: tr("js_need_scores")}), "error"); return; }
    // a criteria dimension with a criterion left alone: the panel's verdict on it is accepted (kept apart)
    let acceptedCriteria = false;
    document.querySelectorAll("table.criteria").forEach((tb) => {
      if (Array.from(tb.querySelectorAll("tr.criterion")).some((r) => !r.querySelector("button.crit[aria-pressed=true]"))) {
        accepted.push(tb.dataset.dim);
        acceptedCriteria = true;
      }
    });
    const reply = await save({op: "scores", case: caseRank, scores, accepted});
    if (reply && acceptedCriteria) { window.location.reload(); return; }
    // a blind spot-check case: the reviewer's own scores are in, so the judges' can be shown now
    if (reply && document.getElementById("case").dataset.blind === "yes") { window.location.reload(); return; }
    if (reply) document.querySelectorAll("input.score").forEach((input) => {
      if (input.dataset.edited === "yes") input.dataset.mine = "yes";
      if (input.dataset.mine !== "yes") input.dataset.mine = "accepted";
      input.closest(".your-score").querySelector(".score-note").textContent =
        tr(input.dataset.mine === "yes" ? "note_mine" : "note_accepted");
    });
  }
  const confirm = document.getElementById("confirm-scores");
  if (confirm) confirm.addEventListener("click", confirmScores);

  document.querySelectorAll("input.dim-comment").forEach((input) => {
    const send = (keep) => save({op: "comment", case: caseRank, dimension: input.dataset.dim, comment: input.value}, keep);
    input.addEventListener("input", debounced(send, 700));
    input.addEventListener("change", () => send());
  });
  const caseComment = document.getElementById("case-comment");
  if (caseComment) {
    const send = (keep) => save({op: "comment", case: caseRank, dimension: null, comment: caseComment.value}, keep);
    caseComment.addEventListener("input", debounced(send, 700));
    caseComment.addEventListener("change", () => send());
  }

  function addedItem(list, id, typeName, points, comment) {
    const li = document.createElement("li");
    li.dataset.id = id;
    const t = document.createElement("span"); t.textContent = typeName;
    const p = document.createElement("span"); p.className = "pts"; p.textContent = "−" + points;
    const c = document.createElement("span"); c.className = "muted"; c.textContent = comment;
    const b = document.createElement("button"); b.type = "button"; b.className = "remove-added"; b.textContent = tr("remove");
    li.append(t, " ", p, " ", c, " ", b);
    list.append(li);
  }
  document.querySelectorAll("section.dim").forEach((dim) => {
    const form = dim.querySelector(".add-form");
    if (!form) return;   // a likert or criteria dimension: no deduction to add
    const list = dim.querySelector(".added-list");
    const type = form.querySelector(".add-type");
    const points = form.querySelector(".add-points");
    const fill = () => { const o = type.selectedOptions[0]; if (o) { points.value = o.dataset.low; points.min = o.dataset.low; points.max = o.dataset.high; } };
    type.addEventListener("change", fill);
    fill();
    form.querySelector(".add-button").addEventListener("click", async () => {
      const comment = form.querySelector(".add-comment");
      const reply = await save({op: "add", case: caseRank, dimension: dim.dataset.dim, type: type.value,
                                points: points.value === "" ? null : Number(points.value), comment: comment.value});
      if (reply && reply.id) {
        addedItem(list, reply.id, type.selectedOptions[0].textContent, points.value, comment.value);
        comment.value = "";
        const summary = dim.querySelector("details.added summary");
        summary.textContent = tr("missed", {n: list.children.length});
      }
    });
    list.addEventListener("click", async (e) => {
      const b = e.target.closest("button.remove-added");
      if (!b) return;
      const li = b.closest("li");
      if (await save({op: "remove", case: caseRank, id: li.dataset.id})) li.remove();
    });
  });

  function go(url) { if (url) window.location.href = url; }
  function step(k) {
    if (!deds.length) return;
    const i = current ? deds.indexOf(current) : -1;
    const ded = deds[Math.max(0, Math.min(deds.length - 1, i + k))];
    highlight(ded, true);
    ded.focus({preventScroll: true});
    ded.scrollIntoView({block: "nearest", behavior: "smooth"});
  }
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && typing(e.target)) { e.target.blur(); if (current) current.focus({preventScroll: true}); return; }
    if (typing(e.target) || e.ctrlKey || e.metaKey || e.altKey) return;
    const verdicts = {a: "agree", d: "disagree", u: "unsure"};
    if (e.key === "j" || e.key === "ArrowRight") go(root.dataset.next);
    else if (e.key === "k" || e.key === "ArrowLeft") go(root.dataset.prev);
    else if (e.key === "q") go(root.dataset.queue);
    else if (e.key === "n") step(1);
    else if (e.key === "p") step(-1);
    else if (verdicts[e.key] && current && current.matches("article.ded")) setVerdict(current, verdicts[e.key]);
    else if (e.key === "c" && current && current.querySelector(".ded-comment, .crit-evidence")) {
      current.querySelector(".ded-comment, .crit-evidence").focus(); e.preventDefault(); }
    else if (e.key === "s") confirmScores();
    else return;
    e.preventDefault();
  });
})();
