"""The report page's script and style, embedded in every report (no network, no files beside it).

The script gives the attempt table its filters (agent, dataset, label, verdict, status,
correct), search (questions, answers, and transcripts on request), sorting, pagination,
URL-hash state (`#verdict=contaminated`, `#open=N`, `#focus=N`) and transcripts loaded
when an attempt is opened; in the live view (`statebox view`) it polls the server.
"""

from statebox.report.visible_text import JS_CLASS

PAGE_JS = r"""// statebox report: filters, search, sorting, pagination and on-demand transcripts.
// Plain JavaScript, no network: data comes from inline JSON blocks (single file), from
// REPORT_files/NAME.js chunk scripts (split report; script tags work from file://), or
// from the live server's api/ endpoints (statebox view).
(function () {
  "use strict";
  const M = JSON.parse(document.getElementById("sb-meta").textContent);
  // one attempt in the index: see ReportPass.index_row
  const F = {IDX: 0, AGENT: 1, DS: 2, ITEM: 3, Q: 4, EPOCH: 5, VERDICT: 6, STATUS: 7, CORRECT: 8, RESP: 9, DUR: 10,
             TOK: 11, COST: 12, CATS: 13, TCH: 14, AID: 15, REASON: 16, ACTION: 17, ITEMID: 18};
  const PAGE = 100;
  const FKEYS = ["agent", "dataset", "label", "verdict", "status", "correct", "q", "t"];
  const S = {rows: [], view: [], page: 0, sortCol: null, sortDir: 1, hay: [], ttext: [], tLoaded: false,
             tLive: null, chunks: {}, waiting: {}, f: {}, lastRowid: 0, summaryRows: M.summary_rows || 0,
             summaryAt: Date.now(), ready: false};
  window.SB = {
    chunk: function (name, data) {
      S.chunks[name] = data;
      const waiting = S.waiting[name] || [];
      delete S.waiting[name];
      waiting.forEach(fn => fn(data));
    },
    state: S,
  };
  const $ = id => document.getElementById(id);
  const esc = s => String(s === null || s === undefined ? "" : s)
    .replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  // vis: esc plus every hidden character (bidi controls, zero-width and other format characters,
  // controls but \n and \t; report/visible_text.py) shown as a styled <U+XXXX>: for element text
  // only (a span cannot sit in an attribute, so attributes keep esc)
  const INVISIBLE = /__INVISIBLE_CLASS__/gu;
  const vis = s => esc(s).replace(INVISIBLE, c =>
    `<span class=uesc>&lt;U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}&gt;</span>`);
  const pad4 = n => String(n).padStart(4, "0");
  // the live view answers only requests that carry its token (the address `statebox view` printed)
  const api = path => fetch(path + (path.includes("?") ? "&" : "?") + "token=" + encodeURIComponent(M.token || ""));

  function loadChunk(name) {
    if (S.chunks[name]) return Promise.resolve(S.chunks[name]);
    const el = document.getElementById("c-" + name);
    if (el) {
      const data = JSON.parse(el.textContent);
      S.chunks[name] = data;
      return Promise.resolve(data);
    }
    return new Promise((resolve, reject) => {
      const first = !S.waiting[name];
      (S.waiting[name] = S.waiting[name] || []).push(resolve);
      if (first) {
        const s = document.createElement("script");
        s.src = M.files + "/" + name + ".js";
        s.onerror = () => reject(new Error("cannot load " + s.src + " (keep the folder beside the report)"));
        document.head.appendChild(s);
      }
    });
  }

  const item = r => (M.items[r[F.DS]] || [])[r[F.ITEM]] || null;
  const queryInfo = r => { const it = item(r); return it ? it[4][String(r[F.Q])] || null : null; };

  const COLS = [
    ["#", r => r[F.IDX], true],
    ["agent", r => M.agents[r[F.AGENT]]],
    ["dataset", r => M.datasets[r[F.DS]]],
    ["item", r => r[F.ITEMID]],
    ["query", r => r[F.Q], true],
    ["epoch", r => r[F.EPOCH], true],
    ["correct", r => (r[F.CORRECT] === null ? -1 : r[F.CORRECT]), true],
    ["verdict", r => M.verdicts[r[F.VERDICT]]],
    ["status", r => M.statuses[r[F.STATUS]]],
    ["answer", r => r[F.RESP]],
    ["findings", r => r[F.CATS]],
    ["s", r => r[F.DUR], true],
    ["tokens", r => r[F.TOK], true],
    ["cost $", r => r[F.COST], true],
  ];

  function hay(r) {
    let h = S.hay[r[F.IDX]];
    if (h === undefined) {
      const it = item(r), qi = queryInfo(r);
      h = S.hay[r[F.IDX]] = [it ? it[1] : "", r[F.RESP], r[F.ITEMID], r[F.CATS], r[F.REASON], qi ? qi[1] : "",
                             it ? it[3].join(" ") : ""].join("\n").toLowerCase();
    }
    return h;
  }

  function transcriptHit(r, q) {
    if (M.live) return !!(S.tLive && S.tLive.q === q && S.tLive.ids.has(r[F.AID]));
    const t = S.ttext[r[F.IDX]];
    return t !== undefined && t.indexOf(q) >= 0;
  }

  function matches(r) {
    const f = S.f;
    if (f.agent && M.agents[r[F.AGENT]] !== f.agent) return false;
    if (f.dataset && M.datasets[r[F.DS]] !== f.dataset) return false;
    if (f.verdict && M.verdicts[r[F.VERDICT]] !== f.verdict) return false;
    if (f.status && M.statuses[r[F.STATUS]] !== f.status) return false;
    if (f.correct) {
      const c = r[F.CORRECT];
      if (f.correct === "correct" ? c !== 1 : f.correct === "incorrect" ? c !== 0 : c !== null) return false;
    }
    if (f.label) {
      const it = item(r);
      if (!it || it[2].indexOf(f.label) < 0) return false;
    }
    if (f.q) {
      const q = f.q.toLowerCase();
      if (hay(r).indexOf(q) < 0 && !(f.t && transcriptHit(r, q))) return false;
    }
    return true;
  }

  function readHash() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ""));
    const f = {};
    for (const k of FKEYS) { const v = p.get(k); if (v) f[k] = v; }
    return {f, sort: p.get("sort"), dir: p.get("dir"), page: p.get("page"), open: p.get("open"), focus: p.get("focus")};
  }

  function writeHash() {
    const p = new URLSearchParams();
    for (const k of FKEYS) if (S.f[k]) p.set(k, S.f[k]);
    if (S.sortCol !== null) { p.set("sort", S.sortCol); p.set("dir", S.sortDir); }
    if (S.page) p.set("page", S.page);
    const h = p.toString();
    try { history.replaceState(null, "", h ? "#" + h : location.pathname + location.search); } catch (e) { /* file:// quirks */ }
  }

  function fillSelect(id, values, current) {
    const sel = $(id);
    if (!sel) return;
    const want = ["<option value=''>all</option>"].concat(values.map(v => `<option value="${esc(v)}">${vis(v)}</option>`)).join("");
    if (sel.dataset.sig !== want) { sel.innerHTML = want; sel.dataset.sig = want; }
    sel.value = current || "";
  }

  function syncControls() {
    fillSelect("f-agent", M.agents, S.f.agent);
    fillSelect("f-dataset", M.datasets, S.f.dataset);
    fillSelect("f-label", M.labels, S.f.label);
    fillSelect("f-verdict", M.verdicts, S.f.verdict);
    fillSelect("f-status", M.statuses, S.f.status);
    $("f-correct").value = S.f.correct || "";
    $("f-q").value = S.f.q || "";
    $("f-t").checked = !!S.f.t;
  }

  function apply(keepPage) {
    S.view = S.rows.filter(matches);
    if (S.sortCol !== null && COLS[S.sortCol]) {
      const [, key, numeric] = COLS[S.sortCol];
      const dir = S.sortDir;
      S.view.sort((a, b) => {
        const x = key(a), y = key(b);
        const c = numeric ? (x - y) : String(x).localeCompare(String(y));
        return c ? c * dir : (a[F.IDX] - b[F.IDX]);
      });
    }
    const pages = Math.max(1, Math.ceil(S.view.length / PAGE));
    if (!keepPage) S.page = 0;
    S.page = Math.min(S.page, pages - 1);
    render();
  }

  function render() {
    const start = S.page * PAGE, slice = S.view.slice(start, start + PAGE);
    const body = slice.map(r => {
      const c = r[F.CORRECT], v = M.verdicts[r[F.VERDICT]], st = M.statuses[r[F.STATUS]];
      const mark = c === null ? "" : c ? "<span class=ok>✔</span>" : "<span class=bad>✘</span>";
      return `<tr class="arow" data-idx="${r[F.IDX]}" data-verdict="${esc(v)}" data-status="${esc(st)}" ` +
        `data-agent="${esc(M.agents[r[F.AGENT]])}" data-correct="${c === null ? "" : c}">` +
        `<td>${r[F.IDX]}</td><td class=l><b>${vis(M.agents[r[F.AGENT]])}</b></td><td class=l>${vis(M.datasets[r[F.DS]])}</td>` +
        `<td class=l>${vis(r[F.ITEMID])}</td><td>${r[F.Q]}</td><td>${r[F.EPOCH]}</td><td>${mark}</td>` +
        `<td class="l ${esc(v)}">${esc(v)}</td><td class=l>${esc(st)}</td><td class="l ans"><code>${vis(String(r[F.RESP]).slice(0, 80))}</code></td>` +
        `<td class=l>${vis(r[F.CATS])}</td><td>${Number(r[F.DUR]).toFixed(1)}</td><td>${r[F.TOK]}</td><td>${Number(r[F.COST]).toFixed(4)}</td></tr>`;
    }).join("");
    $("attempt-rows").innerHTML = body;
    const count = $("count");
    count.dataset.shown = S.view.length;
    count.dataset.total = S.rows.length;
    const a = S.view.length ? start + 1 : 0, b = start + slice.length;
    count.textContent = `${a}–${b} of ${S.view.length.toLocaleString()} attempts` +
      (S.view.length !== S.rows.length ? ` (filtered from ${S.rows.length.toLocaleString()})` : "") +
      (S.loading ? " · " + S.loading : "");
    $("prev").disabled = S.page === 0;
    $("next").disabled = b >= S.view.length;
    document.querySelectorAll("#attempts thead th").forEach((th, i) => {
      th.classList.toggle("sorted", S.sortCol === i);
      th.dataset.dir = S.sortCol === i ? (S.sortDir > 0 ? "▲" : "▼") : "";
    });
  }

  function getTranscript(r) {
    if (M.live) return api("api/attempt?id=" + encodeURIComponent(r[F.AID])).then(x => x.json());
    // transcript chunks are keyed by attempt id (so an unchanged chunk is reused by the next report)
    return loadChunk(M.tchunks[r[F.TCH]]).then(d => d[r[F.AID]] || {ev: [], missing: true});
  }

  // events.jsonl lines as the report carries them (the recorder's objects) -> [seq, kind, time, text, extra]
  function events(t) {
    if (t.events) return t.events;
    const out = [];
    for (const e of t.ev || []) {
      if (!e || typeof e !== "object") continue;
      const data = e.data && typeof e.data === "object" ? e.data : {};
      let kind = String(e.kind || "?");
      if (kind === "message" && data.role) kind += ":" + data.role;
      let text = String(e.text || "");
      if (text.length > 2000) text = text.slice(0, 2000) + "… [" + (text.length - 2000) + " more chars]";
      const extra = kind === "frames" ? JSON.stringify(data).slice(0, 400) : "";
      out.push([e.seq, kind, e.time === undefined ? null : e.time, text, extra]);
    }
    t.events = out;
    return out;
  }

  function eventsHtml(t) {
    const ev = events(t);
    if (!ev.length) return "<p><i>no events recorded</i></p>";
    const out = ev.map(([seq, kind, time, text, extra]) =>
      `<div class=ev><span class=kind>#${vis(seq)} ${vis(kind)}</span>` +
      (time !== null && time !== undefined ? `<small> t=${vis(time)}s</small>` : "") +
      (text ? `<pre>${vis(text)}</pre>` : "") + (extra ? `<pre>${vis(extra)}</pre>` : "") + "</div>");
    if (t.more) out.push(`<p><i>${t.more} more events in events.jsonl</i></p>`);
    return out.join("");
  }

  function detailHtml(r) {
    const it = item(r), qi = queryInfo(r);
    const v = M.verdicts[r[F.VERDICT]];
    return `<div class="attempt-detail" id="attempt-${r[F.IDX]}">` +
      `<p class=dhead><b>${vis(M.agents[r[F.AGENT]])}</b> · ${vis(M.datasets[r[F.DS]])} · ${vis(r[F.ITEMID])} q${r[F.Q]}` +
      (qi && qi[0] !== null ? ` @ ${Number(qi[0]).toFixed(1)}s` : "") + ` e${r[F.EPOCH]} · <span class="${esc(v)}">${esc(v)}</span>` +
      ` (${esc(M.actions[r[F.ACTION]])}) · ${esc(M.statuses[r[F.STATUS]])} · <code>${vis(r[F.AID])}</code></p>` +
      `<p><b>Question:</b> ${vis(it ? it[1] : "?")}` + (it && it[3].length ? `<br><b>Choices:</b> ${vis(it[3].join(" | "))}` : "") + "</p>" +
      `<p><b>Answer:</b> <code class=resp>${vis(r[F.RESP])}</code> · <b>target:</b> <code>${vis(qi ? qi[1] : "?")}</code>` +
      ` · <b>metrics:</b> <span class=metrics>…</span></p>` +
      `<p><b>Status:</b> ${esc(M.statuses[r[F.STATUS]])} ${vis(r[F.REASON])} · ${Number(r[F.DUR]).toFixed(1)}s · tokens ${r[F.TOK]} · $${Number(r[F.COST]).toFixed(4)}</p>` +
      `<div class=findings></div><h4>Transcript</h4><div class=transcript>loading transcript…</div></div>`;
  }

  function fillDetail(div, r) {
    getTranscript(r).then(t => {
      if (t.resp !== undefined) div.querySelector(".resp").innerHTML = vis(t.resp);
      div.querySelector(".metrics").innerHTML = vis(JSON.stringify(t.m || {}));
      if (t.f && t.f.length) {
        div.querySelector(".findings").innerHTML = "<p><b>Audit findings:</b></p><ul>" + t.f.map(f =>
          `<li><b>${vis(f.category)}</b> (${vis(f.severity)}, event #${vis(f.event)}): <code>${vis(f.quote || f.detail || "")}</code></li>`).join("") + "</ul>" +
          (t.fm ? `<p>${vis(t.fm)} more finding(s), less severe or later: in the attempt's verdict.json</p>` : "");
      }
      div.querySelector(".transcript").innerHTML = eventsHtml(t);
      div.classList.add("loaded");
    }).catch(e => { div.querySelector(".transcript").textContent = String(e); });
  }

  function toggleDetail(tr, open) {
    const next = tr.nextElementSibling;
    const isOpen = next && next.classList.contains("detail");
    if (isOpen && open !== true) { next.remove(); tr.classList.remove("open"); return null; }
    if (isOpen) return next.querySelector(".attempt-detail");
    const r = S.rows[Number(tr.dataset.idx)];
    const d = document.createElement("tr");
    d.className = "detail";
    d.innerHTML = `<td colspan="${COLS.length}">${detailHtml(r)}</td>`;
    tr.after(d);
    tr.classList.add("open");
    const div = d.querySelector(".attempt-detail");
    fillDetail(div, r);
    return div;
  }

  function openAttempt(n, focus) {
    const r = S.rows[n];
    if (!r) return;
    let pos = S.view.indexOf(r);
    if (pos < 0) { S.f = {}; syncControls(); apply(false); pos = S.view.indexOf(r); }
    S.page = Math.floor(pos / PAGE);
    render();
    const tr = document.querySelector(`tr.arow[data-idx="${n}"]`);
    if (!tr) return;
    const div = toggleDetail(tr, true);
    if (focus) {
      const holder = document.createElement("div");
      holder.id = "focus";
      holder.appendChild(div);
      for (const el of Array.from(document.body.children)) {
        if (el.tagName !== "H1" && el.tagName !== "SCRIPT") el.style.display = "none";
      }
      document.body.appendChild(holder);
    } else {
      tr.scrollIntoView();
    }
  }

  function loadAllTranscripts() {
    if (M.live || S.tLoaded || S.tLoading) return;
    S.tLoading = true;
    const names = M.tchunks;
    let k = 0;
    const step = () => {
      if (k >= names.length) { S.tLoaded = true; S.loading = ""; apply(true); return; }
      S.loading = `searching transcripts ${k}/${names.length} chunks`;
      render();
      if (!S.byAid || S.byAidN !== S.rows.length) {
        S.byAid = {}; S.byAidN = S.rows.length;
        for (const r of S.rows) S.byAid[r[F.AID]] = r[F.IDX];
      }
      loadChunk(names[k]).then(d => {
        for (const aid in d) {
          const idx = S.byAid[aid];
          if (idx !== undefined) S.ttext[idx] = (d[aid].ev || []).map(e => (e && e.text) || "").join("\n").toLowerCase();
        }
        if (names.length > 8) delete S.chunks[names[k]]; // keep memory flat on big runs
        k += 1;
        step();
      }).catch(e => { S.loading = String(e); render(); });
    };
    step();
  }

  function liveTranscriptSearch() {
    const q = (S.f.q || "").toLowerCase();
    if (!M.live || !S.f.t || !q || (S.tLive && S.tLive.q === q)) return;
    api("api/search?q=" + encodeURIComponent(q)).then(x => x.json()).then(d => {
      S.tLive = {q, ids: new Set(d.ids)};
      apply(true);
    });
  }

  function onFilterChange() {
    S.f = {};
    const pick = (k, id) => { const v = $(id).value; if (v) S.f[k] = v; };
    pick("agent", "f-agent"); pick("dataset", "f-dataset"); pick("label", "f-label"); pick("verdict", "f-verdict");
    pick("status", "f-status"); pick("correct", "f-correct"); pick("q", "f-q");
    if ($("f-t").checked) S.f.t = "1";
    if (S.f.t && S.f.q) { loadAllTranscripts(); liveTranscriptSearch(); }
    apply(false);
    writeHash();
  }

  function fromHash(initial) {
    const h = readHash();
    S.f = h.f;
    S.sortCol = h.sort !== null && h.sort !== "" ? Number(h.sort) : null;
    S.sortDir = h.dir === "-1" ? -1 : 1;
    syncControls();
    if (S.f.t && S.f.q) { loadAllTranscripts(); liveTranscriptSearch(); }
    apply(false);
    if (h.page) { S.page = Math.min(Number(h.page) || 0, Math.max(0, Math.ceil(S.view.length / PAGE) - 1)); render(); }
    const n = h.focus !== null ? h.focus : h.open;
    if (n !== null && n !== "" && initial) openAttempt(Number(n), h.focus !== null);
  }

  function wire() {
    ["f-agent", "f-dataset", "f-label", "f-verdict", "f-status", "f-correct", "f-t"].forEach(id => $(id).addEventListener("change", onFilterChange));
    let timer = null;
    $("f-q").addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(onFilterChange, 250); });
    $("f-clear").addEventListener("click", () => { S.f = {}; syncControls(); apply(false); writeHash(); });
    $("prev").addEventListener("click", () => { S.page = Math.max(0, S.page - 1); render(); writeHash(); });
    $("next").addEventListener("click", () => { S.page += 1; render(); writeHash(); });
    $("attempt-rows").addEventListener("click", ev => {
      const tr = ev.target.closest("tr.arow");
      if (tr) toggleDetail(tr);
    });
    document.querySelectorAll("#attempts thead th").forEach((th, i) => th.addEventListener("click", () => {
      if (S.sortCol === i) S.sortDir = -S.sortDir; else { S.sortCol = i; S.sortDir = 1; }
      apply(true);
      writeHash();
    }));
    window.addEventListener("hashchange", () => fromHash(true));
    wireSortable(document);
  }

  // every other table: click a header to sort it
  function wireSortable(root) {
    root.querySelectorAll("table.sortable").forEach(table => {
      table.querySelectorAll("thead th").forEach((th, i) => th.addEventListener("click", () => sortTable(table, i, th)));
    });
  }

  function sortTable(table, col, th) {
    const body = table.tBodies[0];
    const dir = th.dataset.dir === "▲" ? -1 : 1;
    table.querySelectorAll("thead th").forEach(x => { x.dataset.dir = ""; x.classList.remove("sorted"); });
    th.dataset.dir = dir > 0 ? "▲" : "▼";
    th.classList.add("sorted");
    const cell = tr => (tr.children[col] ? tr.children[col].textContent.trim() : "");
    const rows = Array.from(body.rows);
    rows.sort((a, b) => {
      const x = cell(a), y = cell(b), nx = parseFloat(x), ny = parseFloat(y);
      const c = !isNaN(nx) && !isNaN(ny) ? nx - ny : x.localeCompare(y);
      return c * dir;
    });
    rows.forEach(r => body.appendChild(r));
  }

  function addRows(rows) {
    for (const r of rows) {
      r[F.IDX] = S.rows.length;
      S.rows.push(r);
    }
  }

  // ------------------------------------------------------------------ file report
  function startFile() {
    const names = M.ichunks;
    let k = 0;
    const next = () => {
      if (k >= names.length) { S.loading = ""; S.ready = true; document.body.dataset.ready = "1"; fromHash(true); return; }
      S.loading = `loading attempts ${k + 1}/${names.length}`;
      loadChunk(names[k]).then(d => {
        addRows(d);
        delete S.chunks[names[k]];
        k += 1;
        if (k === 1 || k === names.length) apply(true); else render();
        next();
      }).catch(e => { S.loading = String(e); render(); });
    };
    next();
  }

  // ------------------------------------------------------------------ live view
  function renderStatus(st) {
    const el = $("live-status");
    if (!el) return;
    const pct = st.total ? Math.round(100 * st.done / st.total) : 0;
    const agents = Object.entries(st.agents || {}).map(([a, t]) => `${vis(a)} ${t.done}/${t.total}`).join(" · ");
    const flight = (st.in_flight || []).map(x =>
      `<li><code>${vis(x.attempt_id)}</code> ${vis(x.agent || "")} · ${vis(x.item_id || "")} · ${x.events} events · ${Math.round(x.age_s)}s</li>`).join("");
    el.innerHTML = `<div class=progress><div style="width:${pct}%"></div></div>` +
      `<p><b id=live-done data-done="${st.done}" data-total="${st.total}">${st.done} / ${st.total}</b> attempts written (${pct}%) · ${agents}` +
      ` · ${st.running ? "<span class=suspicious>run in progress</span>" : "no attempt in flight"} · updated ${new Date().toLocaleTimeString()}</p>` +
      (flight ? `<p><b>In flight (${st.in_flight_count}):</b></p><ul class=flight>${flight}</ul>` : "");
  }

  function pollLive() {
    api("api/status").then(x => x.json()).then(st => {
      renderStatus(st);
      const jobs = [];
      const more = () => api("api/rows?after=" + S.lastRowid).then(x => x.json()).then(d => {
          M.agents = d.vocab.agents; M.datasets = d.vocab.datasets; M.verdicts = d.vocab.verdicts;
          M.statuses = d.vocab.statuses; M.actions = d.vocab.actions;
          addRows(d.rows);
          S.lastRowid = d.last;
          syncControls();
          apply(true);
          document.body.dataset.rows = S.rows.length;
          if (d.more) return more();  // a big backlog: keep reading before the next poll
          if (!S.opened) { S.opened = true; const h = readHash(); const n = h.focus !== null ? h.focus : h.open;
                           if (n !== null && n !== "") openAttempt(Number(n), h.focus !== null); }
        });
      if (st.last_rowid > S.lastRowid) jobs.push(more());
      if (st.rows !== S.summaryRows && Date.now() - S.summaryAt > 5000) {
        S.summaryAt = Date.now();
        jobs.push(api("fragment/summary").then(x => x.text()).then(html => {
          $("summary").innerHTML = html;
          wireSortable($("summary"));
          S.summaryRows = st.rows;
        }));
      }
      return Promise.all(jobs);
    }).catch(e => {
      const el = $("live-status");
      if (el) el.insertAdjacentHTML("afterbegin", `<p class=bad>live view not reachable: ${esc(e)}</p>`);
    }).finally(() => setTimeout(pollLive, M.poll_ms || 2000));
  }

  wire();
  syncControls();
  if (M.live) {
    S.ready = true;
    fromHash(false);
    pollLive();
  } else {
    startFile();
  }
})();
"""
PAGE_JS = PAGE_JS.replace("__INVISIBLE_CLASS__", JS_CLASS)  # one table of hidden characters: visible_text.py

CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#1d2430;background:#fafbfc}
h1{margin-bottom:0}h2{margin-top:32px;border-bottom:2px solid #dde3ea;padding-bottom:4px}
.sub{color:#5b6675;margin-top:4px}
nav.toc{font-size:13px;margin:6px 0 0}nav.toc a{margin-right:12px;color:#0969da;text-decoration:none}
table{border-collapse:collapse;margin:8px 0 16px;font-size:14px;background:#fff}
th,td{border:1px solid #dde3ea;padding:4px 8px;text-align:right}th{background:#eef2f6}
td.l,th.l{text-align:left}
table.sortable thead th,#attempts thead th{cursor:pointer;user-select:none;white-space:nowrap}
thead th[data-dir]:not([data-dir=""])::after{content:" " attr(data-dir);color:#0969da}
.clean{color:#1a7f37}.suspicious{color:#9a6700;font-weight:600}.contaminated{color:#cf222e;font-weight:700}
.uesc{color:#fff;background:#cf222e;border-radius:3px;padding:0 2px;font:11px ui-monospace,monospace}.below-prior{color:#bc4c00;font-weight:600}.untold-prior{color:#5b6675;font-style:italic}tr.best-of td{background:#f6f8fa}
pre{white-space:pre-wrap;word-break:break-word;background:#f3f5f8;padding:6px;border-radius:4px;font-size:12px;margin:2px 0}
.ev{margin:2px 0}.kind{display:inline-block;min-width:110px;font-weight:600;font-size:12px;color:#445}
.ok{color:#1a7f37}.bad{color:#cf222e}
img{max-width:100%;border:1px solid #dde3ea;background:#fff}
.grid{display:flex;flex-wrap:wrap;gap:16px}
#glance{display:flex;flex-wrap:wrap;gap:16px;align-items:flex-start}
#glance figure{margin:0;background:#fff;border:1px solid #dde3ea;border-radius:8px;padding:10px 12px}
#glance figcaption{font-weight:600;margin-bottom:6px}
#glance figure:not(.wide){max-width:560px}
#glance .stack{display:flex;flex-direction:column;gap:16px}
#glance .stack figure{max-width:680px}
.headline{font-size:17px;margin:10px 0 14px;padding:10px 14px;background:#fff;border-left:4px solid #0969da;border-radius:4px}
svg.chart{max-width:100%;height:auto;display:block}
#filters{display:flex;flex-wrap:wrap;gap:10px;align-items:center;background:#fff;border:1px solid #dde3ea;border-radius:6px;padding:8px 10px;font-size:13px;position:sticky;top:0;z-index:2}
#filters label{display:flex;gap:4px;align-items:center}
#filters input[type=search]{width:240px}
#pager{margin:6px 0;font-size:13px;display:flex;gap:10px;align-items:center}
#attempts{width:100%}
#attempts td.ans{max-width:260px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
tr.arow{cursor:pointer}tr.arow:hover{background:#f0f6ff}tr.arow.open{background:#e7f0fb}
tr.detail>td{text-align:left;background:#fbfcfd}
.attempt-detail{max-width:1200px}
.progress{height:10px;background:#eef2f6;border-radius:5px;overflow:hidden;max-width:600px}
.progress>div{height:100%;background:#2da44e}
ul.flight{font-size:12px;margin:2px 0}
"""
