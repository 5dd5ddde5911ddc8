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

  function staleBanner(text) {
    const old = document.getElementById("stale-banner");
    const b = old || document.createElement("div");
    b.id = "stale-banner";
    b.className = "stale-banner";
    b.setAttribute("role", "alert");
    b.textContent = text || tr("js_session_lost");
    if (!old) document.body.insertBefore(b, document.body.firstChild);
  }

  // every write carries a fresh action id (a request sent twice is stored once) and the version of the field the
  // page showed (a write from a stale tab is refused as a conflict, shown beside the field); a write that could not
  // reach the server is kept in this browser and sent again when the case is opened again
  const actionId = () => (window.crypto && crypto.randomUUID ? crypto.randomUUID()
    : Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join(""));
  const unsavedPrefix = "ce-unsaved:" + window.location.pathname + ":";
  function keep(action) {
    try { localStorage.setItem(unsavedPrefix + action.action_id, JSON.stringify(action)); } catch (e) { /* full */ }
  }
  function forget(action) {
    try { localStorage.removeItem(unsavedPrefix + action.action_id); } catch (e) { /* none */ }
  }
  function kept() {
    const out = [];
    try {
      for (let i = 0; i < localStorage.length; i++) {
        const k = localStorage.key(i);
        if (k && k.startsWith(unsavedPrefix)) out.push(JSON.parse(localStorage.getItem(k)));
      }
    } catch (e) { /* unreadable: nothing kept */ }
    return out;
  }

  function fieldOf(name) {
    return Array.from(document.querySelectorAll("[data-field]")).find((el) => el.dataset.field === name) || null;
  }
  function noteFor(el) {   // the note beside a score or a criterion (a comment field shows its state by its outline)
    const box = el && (el.closest(".your-score") || el.closest("tr.criterion"));
    return box ? box.querySelector(".score-note, .crit-note") : null;
  }
  function markUnsaved(fields) {
    fields.forEach((el) => {
      el.classList.add("unsaved");
      const note = noteFor(el);
      if (note) note.textContent = tr("note_unsaved");
    });
  }

  let pending = 0;
  // one write at a time from this page, each naming the versions its fields have when it is sent (a score typed
  // and then confirmed with s: the second names the version the first one's answer gave)
  let chain = Promise.resolve();
  function save(action, keepalive, fields) {
    const run = () => send(action, keepalive, fields);
    if (keepalive) return run();
    const p = chain.then(run, run);
    chain = p.catch(() => null);
    return p;
  }
  // fields: the elements (with data-field / data-version) the action writes
  async function send(action, keepalive, fields) {
    fields = (fields || []).filter(Boolean);
    if (!action.action_id) action.action_id = actionId();
    if (action.op === "scores" && action.versions) {
      fields.forEach((el) => { if (el.dataset.dim) action.versions[el.dataset.dim] = parseInt(el.dataset.version || "0", 10); });
    } else if (fields.length && "version" in action) {
      action.version = parseInt(fields[0].dataset.version || "0", 10);
    }
    keep(action);
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
          // the server restarted (sessions live in its memory), the link is no longer valid, or access ended:
          // say so plainly, in a banner; what was typed stays on the page and in this browser (sent again later)
          staleBanner(reply.ended ? reply.error : null);
          say(tr("js_not_saved", {why: reply.ended ? reply.error : tr("js_session_lost_short")}), "error");
          if (reply.ended) forget(action);
          markUnsaved(fields);
        } else if (resp.status === 409 && reply.conflict) {
          forget(action);
          say(tr("js_not_saved", {why: reply.error}), "error");
          showConflict(action, reply.conflict, fields);
        } else {
          forget(action);   // refused: sending it again would be refused again
          say(tr("js_not_saved", {why: reply.error || resp.status}), "error");
          markUnsaved(fields);
        }
        return null;
      }
      forget(action);
      Object.entries(reply.versions || {}).forEach(([name, v]) => {
        const el = fieldOf(name);
        if (el) el.dataset.version = String(v);
      });
      fields.forEach((el) => el.classList.remove("unsaved"));
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
      markUnsaved(fields);
      return null;
    } finally {
      pending -= 1;
    }
  }
  window.addEventListener("beforeunload", (e) => { if (pending > 0) e.preventDefault(); });

  // a conflict: the value saved elsewhere and the reviewer's, side by side; they choose which to keep
  function shown(v) {
    if (v === null || v === undefined || v === "") return tr("conflict_empty");
    return typeof v === "string" && texts[v] ? texts[v] : String(v);   // a verdict in the page's words
  }
  function sentValue(action, field) {
    if (action.op === "scores") return (action.scores || {})[field.split(":")[1]];
    if (action.op === "comment") return action.comment;
    if (action.op === "verdict") return [action.verdict, action.comment].filter(Boolean).map(shown).join(" · ");
    if (action.op === "criterion") return action.met === null ? null : (action.met ? "met" : "not_met");
    return action.value;
  }
  function showConflict(action, conflict, fields) {
    const el = fieldOf(conflict.field) || fields[0];
    if (!el) return;
    const host = el.closest(".your-score, article.ded, tr.criterion td.crit-mine, label, .case-comment") || el.parentNode;
    const old = host.querySelector(".conflict");
    if (old) old.remove();
    const box = document.createElement("div");
    box.className = "conflict";
    box.setAttribute("role", "alert");
    const stored = conflict.stored || {};
    const title = document.createElement("strong"); title.textContent = tr("conflict_title");
    const theirs = document.createElement("span");
    const said = [stored.value, stored.comment].filter((x) => x !== null && x !== undefined && x !== "").map(shown);
    theirs.textContent = tr("conflict_stored", {value: said.length ? said.join(" · ") : tr("conflict_empty")});
    const yours = document.createElement("span");
    yours.textContent = tr("conflict_yours", {value: shown(sentValue(action, conflict.field))});
    const mine = document.createElement("button"); mine.type = "button"; mine.className = "keep-mine";
    mine.textContent = tr("conflict_keep_mine");
    const saved = document.createElement("button"); saved.type = "button"; saved.className = "take-saved";
    saved.textContent = tr("conflict_take_saved");
    box.append(title, " ", theirs, " ", yours, " ", mine, " ", saved);
    host.append(box);
    el.dataset.version = String(conflict.version);
    mine.addEventListener("click", () => {
      box.remove();
      const again = Object.assign({}, action, {action_id: actionId()});
      if (again.op === "scores") again.versions = Object.assign({}, again.versions || {}, {[conflict.field.split(":")[1]]: conflict.version});
      else again.version = conflict.version;
      save(again, false, fields);
    });
    saved.addEventListener("click", () => { box.remove(); window.location.reload(); });
  }

  function typing(el) {   // a level picked on a likert scale (a radio) leaves the shortcuts on
    const choice = el && el.tagName === "INPUT" && (el.type === "radio" || el.type === "checkbox");
    return el && !choice && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
  }

  // text fields save after a pause in typing; anything still waiting is sent when the page goes away
  const waiting = new Map();
  function debounced(fn, ms) {
    let t = null;
    const run = (k) => { clearTimeout(t); waiting.delete(run); fn(k); };
    const later = () => { clearTimeout(t); waiting.set(run, fn); t = setTimeout(run, ms); };
    // a change (the field left) sends at once instead of the pause's send, never beside it: the pause's send,
    // later, would name the version a conflict's answer gave this field and store over the other tab's value
    // before the reviewer chose
    later.now = run;
    return later;
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

  const readOnly = root.dataset.adjudicator === "yes";   // the adjudicator's page: their decisions are references
  const version = (el) => (el && el.dataset.version ? parseInt(el.dataset.version, 10) : 0);

  function dedState(ded, verdict) {
    return {op: "verdict", case: caseRank, ids: JSON.parse(ded.dataset.ids), verdict: verdict,
            comment: ded.querySelector(".ded-comment").value, version: version(ded)};
  }
  function pressedVerdict(ded) {
    const on = ded.querySelector("button.verdict[aria-pressed=true]");
    return on ? on.dataset.verdict : null;
  }

  // a verdict button sets that verdict (pressed again it stays set: a double click changes nothing); × clears it
  function setVerdict(ded, verdict) {
    if (readOnly) return null;
    ded.querySelectorAll("button.verdict").forEach((b) => b.setAttribute("aria-pressed", b.dataset.verdict === verdict ? "true" : "false"));
    return save(dedState(ded, verdict), false, [ded]);
  }

  deds.filter((ded) => ded.matches("article.ded")).forEach((ded) => {
    ded.querySelectorAll("button.verdict").forEach((b) => b.addEventListener("click", () => {
      highlight(ded, false);
      setVerdict(ded, b.dataset.verdict);
    }));
    const clear = ded.querySelector("button.verdict-clear");
    if (clear) clear.addEventListener("click", () => { highlight(ded, false); setVerdict(ded, null); });
    const input = ded.querySelector(".ded-comment");
    const later = debounced((k) => save(dedState(ded, pressedVerdict(ded)), k, [ded]), 700);
    input.addEventListener("input", later);
    input.addEventListener("change", () => later.now(false));
  });

  function scoreNote(input) {
    const note = input.closest(".your-score").querySelector(".score-note");
    if (input.value === "") { note.textContent = tr("note_none"); return; }
    if (input.dataset.frozen) {   // a spot-check case after its reveal: the blind score stays; this is a revision
      note.textContent = tr("note_revised", {blind: input.dataset.frozen, value: input.value});
      return;
    }
    note.textContent = tr("note_mine");
  }

  document.querySelectorAll("input.score").forEach((input) => {
    if (input.type === "hidden") return;   // a likert dimension's: set by its scale
    // typed by the reviewer: their own score, even before its save has answered
    input.addEventListener("input", () => { input.dataset.edited = "yes"; });
    input.addEventListener("change", async () => {
      const reply = await save({op: "score", case: caseRank, dimension: input.dataset.dim,
                                value: input.value === "" ? null : Number(input.value), version: version(input)}, false, [input]);
      if (reply) {
        input.dataset.mine = input.value === "" ? "no" : "yes";
        scoreNote(input);
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
    const reply = await save({op: "score", case: caseRank, dimension: radio.dataset.dim, value: Number(radio.value),
                              version: version(input)}, false, [input]);
    if (reply) {
      input.dataset.mine = "yes";
      scoreNote(input);
    }
  }));

  // a criteria dimension: met / not met per criterion (pressed again: stays; × withdraws), with the evidence
  function critState(row, met) {
    return {op: "criterion", case: caseRank, dimension: row.dataset.dim, criterion: row.dataset.criterion,
            met: met, evidence: row.querySelector(".crit-evidence").value, version: version(row)};
  }
  function pressedMet(row) {
    const on = row.querySelector("button.crit[aria-pressed=true]");
    return on ? on.dataset.met === "true" : null;
  }
  document.querySelectorAll("tr.criterion").forEach((row) => {
    const setMet = async (met) => {
      if (readOnly) return;
      row.querySelectorAll("button.crit").forEach((x) => x.setAttribute("aria-pressed", met !== null && (x.dataset.met === "true") === met ? "true" : "false"));
      if (await save(critState(row, met), false, [row])) {
        row.dataset.origin = met === null ? "" : "own";
        row.querySelector(".crit-note").textContent = "";
      }
    };
    row.querySelectorAll("button.crit").forEach((b) => b.addEventListener("click", () => setMet(b.dataset.met === "true")));
    const clear = row.querySelector("button.crit-clear");
    if (clear) clear.addEventListener("click", () => setMet(null));
    const ev = row.querySelector(".crit-evidence");
    const later = debounced((k) => { if (pressedMet(row) !== null) save(critState(row, pressedMet(row)), k, [row]); }, 700);
    ev.addEventListener("input", later);
    ev.addEventListener("change", () => later.now(false));
  });

  // "Confirm scores": a score the reviewer entered is theirs; a field still showing the panel's score,
  // untouched, is stored as "accepted the panel's score", never as the reviewer's own.
  let confirming = false;
  async function confirmScores() {
    if (readOnly || confirming) return;
    const scores = {};
    const accepted = [];
    const versions = {};
    const inputs = Array.from(document.querySelectorAll("input.score"));
    let missing = false;
    inputs.forEach((input) => {
      versions[input.dataset.dim] = version(input);
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
    confirming = true;
    let reply;
    try {
      reply = await save({op: "scores", case: caseRank, scores, accepted, versions}, false, inputs);
    } finally {
      confirming = false;
    }
    if (reply && acceptedCriteria) { window.location.reload(); return; }
    // a blind spot-check case: the reviewer's own scores are in, so the judges' can be shown now
    if (reply && document.getElementById("case").dataset.blind === "yes") { window.location.reload(); return; }
    if (reply) inputs.forEach((input) => {
      if (input.dataset.edited === "yes") input.dataset.mine = "yes";
      if (input.dataset.mine !== "yes") input.dataset.mine = "accepted";
      if (input.dataset.mine === "yes") scoreNote(input);
      else input.closest(".your-score").querySelector(".score-note").textContent = tr("note_accepted");
    });
  }
  const confirm = document.getElementById("confirm-scores");
  if (confirm) confirm.addEventListener("click", confirmScores);

  document.querySelectorAll("input.dim-comment").forEach((input) => {
    const send = (k) => save({op: "comment", case: caseRank, dimension: input.dataset.dim, comment: input.value,
                              version: version(input)}, k, [input]);
    const later = debounced(send, 700);
    input.addEventListener("input", later);
    input.addEventListener("change", () => later.now());
  });
  const caseComment = document.getElementById("case-comment");
  if (caseComment) {
    const send = (k) => save({op: "comment", case: caseRank, dimension: null, comment: caseComment.value,
                              version: version(caseComment)}, k, [caseComment]);
    const later = debounced(send, 700);
    caseComment.addEventListener("input", later);
    caseComment.addEventListener("change", () => later.now());
  }

  function addedItem(list, id, typeName, points, evidence, comment) {
    if (Array.from(list.children).some((li) => li.dataset.id === id)) return;   // a repeated add: already listed
    const li = document.createElement("li");
    li.dataset.id = id;
    const t = document.createElement("span"); t.textContent = typeName;
    const p = document.createElement("span"); p.className = "pts"; p.textContent = "−" + points;
    const parts = [t, " ", p, " "];
    if (evidence) { const q = document.createElement("q"); q.className = "evidence"; q.textContent = evidence; parts.push(q, " "); }
    const c = document.createElement("span"); c.className = "muted"; c.textContent = comment;
    const b = document.createElement("button"); b.type = "button"; b.className = "remove-added"; b.textContent = tr("remove");
    parts.push(c, " ", b);
    li.append(...parts);
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
    // one deduction per filled-in form: a double click sends the same action id twice, stored once
    let pendingAdd = null;
    form.querySelector(".add-button").addEventListener("click", async () => {
      if (readOnly) return;
      const comment = form.querySelector(".add-comment");
      const evidence = form.querySelector(".add-evidence");
      const action = {op: "add", case: caseRank, dimension: dim.dataset.dim, type: type.value,
                      points: points.value === "" ? null : Number(points.value), evidence: evidence.value,
                      comment: comment.value};
      const same = pendingAdd && JSON.stringify(Object.assign({}, pendingAdd, {action_id: null})) === JSON.stringify(Object.assign({}, action, {action_id: null}));
      action.action_id = same ? pendingAdd.action_id : actionId();
      pendingAdd = action;
      const reply = await save(Object.assign({}, action), false, []);
      if (reply && reply.id) {
        addedItem(list, reply.id, type.selectedOptions[0].textContent, points.value, action.evidence, action.comment);
        if (pendingAdd === action) { comment.value = ""; evidence.value = ""; pendingAdd = null; }
        const summary = dim.querySelector("details.added summary");
        summary.textContent = tr("missed", {n: list.children.length});
      }
    });
    list.addEventListener("click", async (e) => {
      const b = e.target.closest("button.remove-added");
      if (!b || readOnly) return;
      const li = b.closest("li");
      if (await save({op: "remove", case: caseRank, id: li.dataset.id})) li.remove();
    });
  });

  // what could not be saved before (a restart, a lost connection): sent again now, then the page shows it
  // (one that reached the server after all, e.g. sent as the page went away, is stored already: nothing changes)
  // a restored field is shown as sent (a score, a comment, a verdict, a criterion); anything else reloads the page
  function showSent(action) {
    if (action.op === "score") {
      const input = Array.from(document.querySelectorAll("input.score")).find((x) => x.dataset.dim === action.dimension);
      if (!input) return false;
      input.value = action.value === null ? "" : String(action.value);
      input.dataset.mine = action.value === null ? "no" : "yes";
      scoreNote(input);
      return true;
    }
    if (action.op === "comment") {
      const el = action.dimension ? Array.from(document.querySelectorAll("input.dim-comment")).find((x) => x.dataset.dim === action.dimension)
        : document.getElementById("case-comment");
      if (el) el.value = action.comment || "";
      return !!el;
    }
    if (action.op === "verdict") {
      const ded = fieldOf("verdict:" + action.ids[0]);
      if (!ded) return false;
      ded.querySelectorAll("button.verdict").forEach((b) => b.setAttribute("aria-pressed", b.dataset.verdict === action.verdict ? "true" : "false"));
      ded.querySelector(".ded-comment").value = action.comment || "";
      return true;
    }
    return false;
  }
  const again = readOnly ? [] : kept().filter((x) => x && x.case === caseRank);
  if (again.length) {
    (async () => {
      let reload = false;
      for (const action of again) {
        const reply = await save(action, false, []);
        if (reply !== null && reply.applied === true) {
          say(tr("restored", {n: again.length}), "saved");
          reload = !showSent(action) || reload;
        }
      }
      if (reload) window.location.reload();
    })();
  }

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
