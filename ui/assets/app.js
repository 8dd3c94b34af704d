// topokit ui: plain JavaScript, no framework, no build step. The server
// renders the page; this script fetches JSON from /api/ and fills it in.
"use strict";

const $ = (sel) => document.querySelector(sel);
const csrf = document.querySelector('meta[name="csrf-token"]').content;
const writable = document.body.dataset.writable === "true";

// Answers arrive in any order, and after the user did other things: each
// one is drawn only if it is still wanted. A Pane (the listing, the file)
// shows what was opened in it last (its key: a path, or a search), kept
// fresh by reloads; every ask for it takes a number from its seq, and an
// answer is as new as its ask:
//   - an open's answer is drawn only if nothing was opened in the pane
//     (nor the pane closed, nor its content taken over) since it was
//     asked for, and (see behind) it is not older than what the pane
//     shows of the same key;
//   - a reload's answer only if the pane still shows the key it was asked
//     for, and nothing asked for later was drawn.
// shown is the number of the answer drawn: it changes whenever the pane
// is drawn again (More checks it); opened that of the open drawn.
class Pane {
  constructor() { this.seq = 0; this.asked = 0; this.opened = 0; this.shown = 0; this.key = null; }
  // open numbers an open; drawOpen(n, key) says whether its answer (for
  // key) may be drawn, and if so records it as drawn.
  open() { return (this.asked = ++this.seq); }
  latest(n) { return n === this.asked; }
  drawOpen(n, key) {
    if (n !== this.asked) return false;
    this.opened = this.shown = n;
    this.key = key;
    return true;
  }
  // behind says whether the answer to open n (for key) is older than what
  // the pane shows: a reload of the same key asked after it was drawn
  // first. Such an answer is not drawn (the open is done all the same).
  behind(n, key) { return key === this.key && n < this.shown; }
  // reload numbers a reload of what the pane shows; drawReload(r) says
  // whether its answer may be drawn, and if so records it as drawn.
  reload() { return { n: ++this.seq, key: this.key }; }
  drawReload(r) {
    if (r.key === null || r.key !== this.key || r.n < this.shown) return false;
    this.shown = r.n;
    return true;
  }
  // takeOver drops the opens asked for so far (the user went on with what
  // the pane shows: began to edit it); clear drops the answers for what
  // the pane shows (it is gone), not the opens asked for since; close
  // drops every answer asked for so far (the pane was closed).
  takeOver() { this.asked = ++this.seq; }
  clear() { this.key = null; this.opened = this.shown = ++this.seq; }
  close() { this.asked = ++this.seq; this.clear(); }
}

// list is the listing pane (a directory's entries, or a search's files),
// file the file pane; editSeq counts the editors opened and closed (a
// save's answer is for the editor it was asked from), saving is the
// editSeq of the editor whose save is being asked (null: none); coordSeq,
// compareSeq and cacheSeq number the asks of the coordination tables, the
// comparison and the cache badge (the last asked for, or for the badge
// the newest, is drawn). changeNo numbers what the live stream told
// (each change event, each start of the stream); changedAt maps a path to
// the number of the last event that named it, allChangedAt is the number
// of the last event after which anything may have changed (a stream
// (re)started, an event naming too many paths): a file asked for before
// such a number is read again once drawn (see openFile). streamStarts
// counts the starts of live streams ("ready"). readNo numbers the re-reads
// (applyChanges); the badge says "live" once a re-read of all the page
// shows, numbered liveFrom or later, succeeded: liveFrom is the number of
// the read after the stream's last start, or of a read after the last
// re-read that failed (Infinity while no stream started). A failed re-read
// is tried again after retryDelay ms (doubling, at most 30 s) unless a
// change or a restart of the stream reads first (retryRound: the readNo
// whose failure set the delay). A stream the server refused (an HTTP
// error: the browser's EventSource then gives up for good) is started
// again after streamDelay ms (streamTimer; the same backoff, reset when a
// stream starts; streamProbe: the request asked to learn why, dropped
// when the stream is started again). pageSize is the server's
// page of directory entries. watchFile is the file the live stream
// follows besides the directory (one shown that lies outside it, opened
// from a search; null: none); watching is the last stream asked for
// ({ dir, file }: started again when a hidden tab is shown). saves counts the page's saves answered
// (written). wrote maps "path version" to { hex, until }: the value the
// page's saves wrote at that version, or wrote over (the version a save
// replaced, read by a re-read asked before the save was answered); a file
// read at such a version with that value, by a read asked while saves was
// below until, is the page's own doing, not another writer's change
// (versions are compared, not times; the value too, and the time of the
// ask, as a store may number the versions of a file created again from
// the start: ZooKeeper). Both are the page's only for the reads asked
// before that save was answered (until: its number in saves): a read
// asked later of the version written, while the editor edits on it, is
// the version shown (see reloadFile). seenDuringSave holds the versions
// of the file edited read while its save was asked (with the saves count
// when asked), told as changes once the save answered unless that save
// wrote them.
const state = {
  dir: null, next: -1, file: null, editing: false, events: null, reloadTimer: null,
  list: new Pane(), filePane: new Pane(), editSeq: 0, saving: null, coordSeq: 0, compareSeq: 0, cacheSeq: 0, cacheShown: 0,
  changeNo: 0, changedAt: new Map(), allChangedAt: 0, streamStarts: 0,
  readNo: 0, liveFrom: Infinity, retryTimer: null, retryDelay: 0, retryRound: -1, pageSize: 200,
  streamTimer: null, streamDelay: 0, streamProbe: null,
  watchFile: null, watching: null, saves: 0, wrote: new Map(), seenDuringSave: [],
};

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const k of kids) e.append(k instanceof Node ? k : document.createTextNode(k == null ? "" : String(k)));
  return e;
}

async function api(method, url, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") opts.headers["X-Topokit-CSRF"] = csrf;
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const r = await fetch(url, opts);
  const data = await r.json().catch(() => ({ error: r.statusText }));
  if (!r.ok) {
    const err = new Error(data.error || r.statusText);
    err.status = r.status;
    err.data = data;
    throw err;
  }
  return data;
}

function showError(msg) {
  const e = $("#error");
  e.textContent = msg || "";
  e.hidden = !msg;
}

// toasts records every message toasted, in order (tests read it).
window.toasts = [];

function toast(msg) {
  window.toasts.push(msg);
  const t = $("#toast");
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.hidden = true; }, 2500);
}

function q(params) { return new URLSearchParams(params).toString(); }

// pathHash is the address fragment that keeps the directory p shown
// (#PATH, percent-encoded but for its "/": a path may hold "%" or "#"),
// hashPath the path of a fragment (one typed or bookmarked unencoded,
// whose "%" starts no escape, is taken as it is).
function pathHash(p) { return "#" + encodeURIComponent(p).replace(/%2F/g, "/"); }
function hashPath(h) {
  h = h.replace(/^#/, "");
  try { return decodeURIComponent(h); } catch (_) { return h; }
}

// cleanDir is the canonical form of the directory path p; typedDir that
// of a path typed in a form, without the spaces around it. Only typed
// paths are trimmed: a name may begin or end with a space.
function cleanDir(p) {
  p = p || "/";
  if (!p.startsWith("/")) p = "/" + p;
  if (p.length > 1 && p.endsWith("/")) p = p.slice(0, -1);
  return p;
}

function typedDir(v) { return cleanDir(v.trim()); }

function parentOf(p) {
  const i = p.lastIndexOf("/");
  return i <= 0 ? "/" : p.slice(0, i);
}

// ---- confirmation dialog ----
function ask(text, withInput) {
  return new Promise((resolve) => {
    $("#modal-text").textContent = text;
    const input = $("#modal-input");
    input.hidden = !withInput;
    input.value = "";
    $("#modal").hidden = false;
    const done = (v) => {
      $("#modal").hidden = true;
      $("#modal-ok").onclick = null;
      $("#modal-cancel").onclick = null;
      resolve(v);
    };
    $("#modal-ok").onclick = () => done(withInput ? input.value : true);
    $("#modal-cancel").onclick = () => done(null);
    (withInput ? input : $("#modal-ok")).focus();
  });
}

// ---- line diff (longest common subsequence) ----
// diffLines diffs the lines of a and b. The lines both begin and end with
// are the same; only the lines between are diffed, and when they are too
// many for the table (more than 4e6 pairs), all of them are told as
// deleted and added: a large file with a small edit, or none, is diffed
// exactly.
function diffLines(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  let head = 0;
  while (head < x.length && head < y.length && x[head] === y[head]) head++;
  let tail = 0;
  while (tail < x.length - head && tail < y.length - head && x[x.length - 1 - tail] === y[y.length - 1 - tail]) tail++;
  const same = (l) => ["same", l];
  return x.slice(0, head).map(same).concat(diffMiddle(x.slice(head, x.length - tail), y.slice(head, y.length - tail)), x.slice(x.length - tail).map(same));
}

function diffMiddle(x, y) {
  if (x.length * y.length > 4e6) {
    return x.map((l) => ["del", l]).concat(y.map((l) => ["add", l]));
  }
  const n = x.length, m = y.length;
  const dp = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      dp[i][j] = x[i] === y[j] ? dp[i + 1][j + 1] + 1 : Math.max(dp[i + 1][j], dp[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push(["same", x[i]]); i++; j++; }
    else if (dp[i + 1][j] >= dp[i][j + 1]) out.push(["del", x[i++]]);
    else out.push(["add", y[j++]]);
  }
  while (i < n) out.push(["del", x[i++]]);
  while (j < m) out.push(["add", y[j++]]);
  return out;
}

function renderDiff(target, a, b) {
  target.replaceChildren();
  const d = diffLines(a, b);
  if (!d.some(([k]) => k !== "same")) {
    target.append(el("div", { class: "same" }, "(no change)"));
    return false;
  }
  for (const [k, line] of d) {
    target.append(el("div", { class: k }, (k === "add" ? "+ " : k === "del" ? "- " : "  ") + line));
  }
  return true;
}

// ---- browsing ----
// openDir shows the directory p (a file: its parent, then the file). An
// answer for a directory (or search) asked for before the last one is
// dropped (see Pane). It returns whether p (or its parent) was shown.
async function openDir(p, keepFile) {
  p = cleanDir(p);
  const seq = state.list.open();
  showError("");
  $("#search-results").hidden = true;
  $("#entries").hidden = false;
  let data;
  try {
    data = await api("GET", "/api/dir?" + q({ path: p }));
  } catch (e) {
    if (!state.list.latest(seq)) return false;
    if (e.status === 404 && p !== "/") {
      // A file, not a directory: open it in its parent.
      try {
        if (!(await openDir(parentOf(p), true))) return false;
        await openFile(p);
        return true;
      } catch (_) { /* fall through */ }
    }
    showError(e.message);
    return false;
  }
  // (a reload of p asked after this open and drawn first is newer)
  if (state.list.latest(seq) && state.list.behind(seq, data.path)) return true;
  if (!state.list.drawOpen(seq, data.path)) return false;
  const changedDir = state.dir !== data.path;
  state.dir = data.path;
  state.next = data.next;
  $("#path").value = data.path;
  $("#dir-title").textContent = data.path + " (" + data.total + " entries)";
  const body = $("#entries tbody");
  body.replaceChildren();
  appendEntries(data.entries);
  $("#more").hidden = data.next < 0;
  if (location.hash !== pathHash(data.path)) history.replaceState(null, "", pathHash(data.path));
  if (!keepFile && changedDir && !state.editing) closeFile();
  if (changedDir) watch(data.path, outsideFile(data.path));
  return true;
}

// outsideFile is the path of the file shown when it lies outside the
// directory dir (the live stream must follow it too), else null.
function outsideFile(dir) {
  const f = state.file;
  if (!f || $("#file").hidden || dir == null) return null;
  return f.path.startsWith(dir === "/" ? "/" : dir + "/") ? null : f.path;
}

// closeFile hides the file pane; answers for it asked for before are
// dropped.
function closeFile() {
  $("#file").hidden = true;
  state.filePane.close();
}

function appendEntries(entries, flash) {
  const body = $("#entries tbody");
  for (const e of entries) {
    const name = el("a", { "data-path": e.path, onclick: (ev) => { ev.preventDefault(); e.file && !e.dir ? openFile(e.path) : openDir(e.path); } },
      e.name + (e.dir && !e.file ? "/" : ""));
    const extra = [];
    if (e.dir && e.file) extra.push(el("a", { onclick: (ev) => { ev.preventDefault(); openDir(e.path); } }, " [dir]"));
    const row = el("tr", { "data-path": e.path, class: flash && flash.has(e.path) ? "changed" : "" },
      el("td", {}, name, ...extra, e.ephemeral ? el("span", { class: "eph" }, " ephemeral" + (e.owner ? " (" + e.owner + ")" : "")) : ""),
      el("td", {}, e.version || ""),
      el("td", {}, e.size == null ? "" : e.size + " B"),
      el("td", {}, e.dir ? "dir" : "file"));
    body.append(row);
  }
}

// more appends the next page of the listing shown. The page is dropped
// when the listing was drawn again since it was asked for (another
// directory, a search, a reload: it would not continue what is shown) or
// another press of More appended it already.
async function more() {
  if (state.next < 0) return;
  const shown = state.list.shown, offset = state.next;
  let data;
  try {
    data = await api("GET", "/api/dir?" + q({ path: state.dir, offset }));
  } catch (e) {
    if (shown === state.list.shown && offset === state.next) showError(e.message);
    return;
  }
  if (shown !== state.list.shown || offset !== state.next) return;
  state.next = data.next;
  appendEntries(data.entries);
  $("#more").hidden = data.next < 0;
}

// search shows the files under a prefix in place of the listing (an open
// of the listing pane: see Pane).
async function search(prefix) {
  showError("");
  const seq = state.list.open();
  try {
    const data = await api("GET", "/api/search?" + q({ prefix }));
    if (!state.list.drawOpen(seq, "?" + data.prefix)) return;
    const box = $("#search-results");
    // (files under keys that are no canonical path cannot be opened:
    // they are counted, not listed)
    const odd = data.odd ? "; " + data.odd + (data.odd === 1 ? " file" : " files") + " under keys that are no canonical path (another tool's) not listed" : "";
    box.replaceChildren(el("div", { class: "pane-head" }, data.files.length + " files under prefix " + data.prefix + (data.truncated ? " (first ones)" : "") + odd));
    const t = el("table", {});
    for (const f of data.files) {
      t.append(el("tr", {}, el("td", {}, el("a", { "data-path": f.path, onclick: (ev) => { ev.preventDefault(); openFile(f.path); } }, f.path)),
        el("td", {}, f.version), el("td", {}, f.size + " B")));
    }
    box.append(t);
    box.hidden = false;
    $("#entries").hidden = true;
    $("#more").hidden = true;
  } catch (e) { if (state.list.latest(seq)) showError(e.message); }
}

function show(which) {
  for (const b of document.querySelectorAll(".subtab")) b.classList.toggle("active", b.dataset.show === which);
  for (const k of ["decoded", "text", "hex", "meta", "history"]) $("#show-" + k).hidden = k !== which;
}

// valueText is the value of f (an answer of /api/file) as one text:
// decoded, else as text, else as hex; "(empty)" for no bytes.
function valueText(f) {
  return f.decoded || (f.size === 0 ? "(empty)" : f.text != null ? f.text : hexDump(f.hex));
}

function hexDump(h) {
  const out = [];
  for (let i = 0; i < h.length; i += 32) {
    const chunk = h.slice(i, i + 32).match(/../g).join(" ");
    out.push((i / 2).toString(16).padStart(6, "0") + "  " + chunk);
  }
  return out.join("\n");
}

// openFile shows the file p; an answer for a file asked for before the
// last one (or before the pane was closed, or its file taken to edit) is
// dropped (see Pane). A change streamed while the answer was awaited may
// be missing from it (the store was read at some point in between), and
// the live reload it caused found another file shown; so may a change
// made before the stream's last start, when the stream restarted while
// the answer was awaited: once drawn, the file is read again, and the
// badge does not say "live" until that read succeeded. A file outside
// the directory shown (opened from a search) is followed by the live
// stream too: the stream restarts with it (see watch).
async function openFile(p) {
  showError("");
  const seq = state.filePane.open();
  const since = state.changeNo;
  let f;
  try {
    f = await api("GET", "/api/file?" + q({ path: p }));
  } catch (e) { if (state.filePane.latest(seq)) showError(e.message); return; }
  // (a reload of p asked after this open and drawn first is newer)
  if (state.filePane.latest(seq) && state.filePane.behind(seq, f.path)) return;
  if (!state.filePane.drawOpen(seq, f.path)) return;
  drawFile(f);
  const outside = outsideFile(state.dir);
  if (outside && outside !== state.watchFile) {
    watch(state.dir, outside); // (its start reads the file again)
    return;
  }
  if ((state.changedAt.get(f.path) || 0) > since || state.allChangedAt > since) {
    state.liveFrom = Math.max(state.liveFrom, state.readNo + 1);
    state.pendingMore = true;
    clearTimeout(state.reloadTimer);
    if (state.liveFrom !== Infinity) setLive(false, "reading " + f.path + " again…");
    await applyChanges();
  }
}

// readFailed says on the badge that what the page shows may be stale: a
// re-read of it failed (msg says why). Everything is read again at the
// next change, restart of the stream, or after a delay; the badge says
// "live" again after such a read succeeds.
// The delay doubles once per round of reads that failed (a file and a
// listing that both failed wait as one failure).
function readFailed(msg) {
  state.liveFrom = Math.max(state.liveFrom, state.readNo + 1);
  state.pendingMore = true;
  setLive(false, "not live: a re-read failed (" + msg + "), trying again");
  clearTimeout(state.retryTimer);
  if (state.retryRound !== state.readNo) {
    state.retryRound = state.readNo;
    state.retryDelay = backoff(state.retryDelay);
  }
  state.retryTimer = setTimeout(applyChanges, state.retryDelay);
}

// backoff is the delay (ms) of the next try after one that waited ms
// (0: none yet): 1 s, doubling, at most 30 s.
function backoff(ms) {
  return Math.min(30000, ms ? ms * 2 : 1000);
}

// reloadFile reads the file shown again and draws it (or closes the pane
// when the file is gone), unless another file was opened meanwhile, or an
// editor is open: then the page only says that the file changed (if its
// version is not the one shown) or was deleted. It returns false when the
// read failed (not a 404) while the pane still shows the file: the badge
// says so (readFailed).
async function reloadFile() {
  const f = state.file;
  const r = state.filePane.reload();
  const saves = state.saves;
  let nf;
  try { nf = await api("GET", "/api/file?" + q({ path: f.path })); } catch (e) {
    if (r.key !== state.filePane.key) return true;
    if (e.status !== 404) { readFailed(e.message); return false; }
    // A file deleted in the store is no longer shown (an editor of it
    // stays open, told: its Save says the file was deleted).
    if (state.editing) { toast(f.path + " was deleted in the store"); return true; }
    if (state.filePane.drawReload(r)) {
      $("#file").hidden = true;
      state.filePane.clear();
      toast(f.path + " was deleted in the store");
    }
    return true;
  }
  if (r.key !== state.filePane.key) return true;
  if (state.editing) {
    // (a version this page wrote, or wrote over, is its own; one read
    // while a save is asked is told once the save answered, unless that
    // save wrote it)
    // (the value too: a ZooKeeper file created again numbers its
    // versions from 0 again)
    if ((nf.version === state.file.version && nf.hex === state.file.hex) || ownWrite(nf, saves)) return true;
    if (state.saving === state.editSeq && state.base && state.base.path === nf.path) state.seenDuringSave.push({ nf, saves });
    else toast(f.path + " changed in the store");
    return true;
  }
  if (state.filePane.drawReload(r)) drawFile(nf);
  return true;
}

// ownWrite says whether f (an answer of /api/file, asked for when
// state.saves was saves) is a version a save of this page wrote (or wrote
// over), with that value, and still the page's when f was asked for (see
// state.wrote).
function ownWrite(f, saves) {
  const w = state.wrote.get(f.path + " " + f.version);
  return !!w && w.hex === f.hex && saves < w.until;
}

// wroteFile records the answer r of a save of the file base (the version
// it replaced, null for a create) in state.wrote: the save numbered
// state.saves (see state).
function wroteFile(r, base) {
  const n = ++state.saves;
  if (state.wrote.size > 1000) state.wrote.clear();
  if (base) state.wrote.set(base.path + " " + base.version, { hex: base.hex, until: n });
  state.wrote.set(r.path + " " + r.version, { hex: r.hex, until: n });
}

// drawFile shows f (an answer of /api/file, or of a save) in the file
// pane, closing the editor unless keepEditor (a save that keeps what was
// typed since).
function drawFile(f, keepEditor) {
  state.file = f;
  $("#file").hidden = false;
  $("#file-path").textContent = f.path;
  // A record that does not decode is shown raw (Text or Hex): the note
  // saying so and why is in the line above the tabs, always seen.
  const undecoded = f.decodeError ? "not decoded: " + f.decodeError + " (shown raw)" : "";
  $("#file-info").textContent = "version " + f.version + " · " + f.size + " bytes" + (f.type ? " · " + f.type : "") + (undecoded ? " · " + undecoded : "");
  $("#show-decoded").textContent = f.decoded || undecoded || "(no record type for this path: see Text or Hex)";
  $("#show-text").textContent = f.text != null ? f.text : "(not printable text: see Hex)";
  $("#show-hex").textContent = hexDump(f.hex) || "(empty)";
  $("#show-meta").textContent = f.meta ? Object.entries(f.meta).map(([k, v]) => k + ": " + v).join("\n") : "(the store keeps nothing more)";
  $("#history-hint").textContent = f.meta && f.meta.create_revision ? "etcd: the first version is " + f.meta.create_revision + ", the current one " + f.version + " (earlier values until compaction)" : "";
  $("#history-value").textContent = "";
  show(f.decoded ? "decoded" : f.text != null ? "text" : "hex");
  if (writable && !keepEditor) closeEditor();
}

// ---- editing ----
// formatOffered says whether the editor offers format for f: whether it
// holds f's value exactly, so that the review diffs against the very
// bytes a save replaces. Hex always; text when textEditable; JSON when
// the record decodes fully as its type (jsonEdit: its JSON encodes back
// to the same record, and a save of it fits in a request). A record of a
// known type that does not decode, or holds fields its type lacks, is
// not offered as JSON: the editor opened empty in it, the review diffed
// from nothing, and a save replaced bytes the user never saw.
function formatOffered(f, format) {
  if (format === "json") return !!f.jsonEdit;
  if (format === "text") return textEditable(f);
  return format === "hex";
}

// notOffered says why format is not offered for f (see formatOffered).
function notOffered(f, format) {
  if (format === "json") {
    return "not editable as JSON: " + (f.jsonEditError || f.decodeError || (f.type ? "not a " + f.type : "no record type for this path"));
  }
  return f.text == null ? "not text" : "a text holding a carriage return, which the editor would turn into a line feed";
}

// currentAs is the value of f as the editor shows it in format. A value
// the format cannot show says so (in a diff or a conflict's value),
// never "" (which read as an empty file).
function currentAs(f, format) {
  if (format === "hex") return f.hex;
  if (format === "json") return f.jsonEdit ? f.decoded : "(" + notOffered(f, format) + ": " + f.size + " bytes, shown in Hex)";
  return f.text != null ? f.text : "(not text: " + f.size + " bytes, shown in Hex)";
}

// textEditable reports whether the editor can hold f's value as text
// unchanged: a textarea turns every carriage return into a line feed, so
// a value holding one is edited as hex (or as JSON), never as text, where
// a save would rewrite line ends the user did not touch.
function textEditable(f) {
  return f.text != null && !f.text.includes("\r");
}

// setBase makes f the value the editor edits on; a format that cannot
// hold it exactly is not offered (see formatOffered). The format chosen
// stays (what was typed in it is kept) when it is no longer offered (the
// editor edits on another writer's value since: rebase), but the review
// then says so and Save stays disabled until another format is chosen.
function setBase(f) {
  state.base = f;
  for (const o of $("#format").options) o.disabled = !formatOffered(f, o.value);
}

function openEditor(fromFile) {
  const f = fromFile || state.file;
  state.filePane.takeOver();
  state.editSeq++;
  state.editing = true;
  setBase(f);
  const format = f.jsonEdit ? "json" : textEditable(f) ? "text" : "hex";
  $("#format").value = format;
  $("#editor").value = currentAs(f, format);
  $("#editor-box").hidden = false;
  $("#diff").replaceChildren();
  $("#conflict").hidden = true;
  $("#unsaved").hidden = true;
  $("#save").disabled = true;
}

function closeEditor() {
  state.editSeq++;
  state.editing = false;
  state.base = null;
  if ($("#editor-box")) $("#editor-box").hidden = true;
  if ($("#save")) $("#save").disabled = true;
}

// review diffs the editor against the value it edits on, in the format
// chosen, and enables Save when they differ. When that format cannot show
// the value exactly (see setBase) there is no diff to show: it says so,
// and Save stays disabled. A record whose bytes are not those its JSON
// encodes to (jsonReencoded) is said to be replaced beyond the diff.
function review() {
  const format = $("#format").value;
  if (!formatOffered(state.base, format)) {
    $("#diff").replaceChildren(el("div", { class: "del" }, "Version " + state.base.version + " of " + state.base.path + " is " + notOffered(state.base, format) +
      ": a save would replace bytes not shown here. Choose another format to edit it (what you typed is replaced by the value)."));
    $("#save").disabled = true;
    return;
  }
  const changed = renderDiff($("#diff"), currentAs(state.base, format), $("#editor").value);
  if (changed && format === "json" && state.base.jsonReencoded) {
    $("#diff").append(el("div", { class: "del" }, "Besides: the record is stored encoded anew, and version " + state.base.version +
      " is encoded otherwise: the save replaces its bytes with other ones beyond this diff (the same fields and values, e.g. map entries in another order; Hex shows them)."));
  }
  $("#save").disabled = !changed || state.saving === state.editSeq;
}

// save writes the editor's value over the version it was edited from.
// When the editor was closed (or another opened) before the answer came,
// the answer is only told: it never touches another file's editor.
// One save of an editor is asked at a time: Save is disabled until the
// answer (a second press wrote nothing, as its version was gone, and was
// told as another writer's change). Text typed while the save was asked
// is kept: the editor stays open on the version written (the answer
// carries it), says that the text is not saved, and the next Save writes
// it over that version. A save of a file another writer deleted (409
// with gone) says so and offers to create the file again
// with the text (recreate: save with create, which the store refuses if
// the file exists again) or to discard it (discard); nothing is written
// until the user chooses.
async function save(create) {
  create = create === true;
  const base = state.base;
  const edit = state.editSeq;
  if (!state.editing || !base || state.saving === edit) return;
  // (a format that cannot show the value replaced saves nothing: the
  // review says why; a create replaces nothing)
  if (!create && !formatOffered(base, $("#format").value)) { review(); return; }
  state.saving = edit;
  state.seenDuringSave = [];
  $("#save").disabled = true;
  const asked = state.filePane.asked;
  // (base: the value edited, refused if the store holds another at that
  // version: a ZooKeeper file created again numbers its versions from 0)
  const body = { path: base.path, version: create ? "" : base.version, format: $("#format").value, value: $("#editor").value };
  // (its SHA-256, not its bytes: in hex, twice the value's size, a value
  // over the size limit, another tool's, made a request too large)
  if (!create) body.baseSha256 = base.sha256;
  // tellSeen tells the versions of the file read while the save was asked
  // that it did not write: another writer's.
  const tellSeen = () => {
    const seen = state.seenDuringSave;
    state.seenDuringSave = [];
    if (seen.some((s) => !ownWrite(s.nf, s.saves))) toast(base.path + " changed in the store");
  };
  try {
    const r = await api("PUT", "/api/file", body);
    wroteFile(r, create ? null : base);
    toast("saved " + r.path + " at version " + r.version);
    tellSeen();
    if (edit !== state.editSeq) return;
    // Another file asked for meanwhile is shown when it comes, and closes
    // the editor; until then (or if its open fails) the editor edits on
    // the version written, as when text was typed since.
    const other = state.filePane.asked !== asked;
    const typed = $("#editor").value !== body.value || $("#format").value !== body.format;
    if (other || typed) {
      if (!other) state.filePane.drawOpen(state.filePane.open(), r.path);
      drawFile(r, true);
      $("#show-meta").textContent = "version: " + r.version + " (written by this page)\nsize: " + r.size + " bytes";
      setBase(r);
      $("#conflict").hidden = true;
      $("#unsaved").textContent = "Saved version " + r.version + " (what you had when you pressed Save). What you typed since is not saved: Save writes it over version " + r.version + ".";
      $("#unsaved").hidden = !typed;
      state.saving = null;
      review();
      return;
    }
    closeEditor();
    await openFile(r.path);
  } catch (e) {
    tellSeen();
    if (edit !== state.editSeq) {
      showError(e.status === 409 ? "Not saved: another writer changed " + base.path + " since version " + base.version + ". Nothing was overwritten." : base.path + " not saved: " + e.message);
    } else if (e.status === 409 && e.data && e.data.current) {
      const cur = e.data.current;
      $("#conflict").hidden = false;
      $("#conflict-current").hidden = false;
      $("#conflict-deleted").hidden = true;
      $("#conflict-msg").textContent = create ? "Not created: another writer created " + cur.path + " again meanwhile. Nothing was overwritten."
        : "Not saved: another writer changed " + cur.path + " since version " + base.version + ". Nothing was overwritten.";
      $("#conflict-version").textContent = cur.version;
      // (in the format edited when it shows the value exactly, else its
      // bytes, in hex: never nothing, nor a diff from what it is not)
      const format = $("#format").value;
      if (formatOffered(cur, format)) {
        $("#conflict-value").textContent = currentAs(cur, format);
        renderDiff($("#conflict-diff"), currentAs(cur, format), $("#editor").value);
      } else {
        $("#conflict-value").textContent = "(" + notOffered(cur, format) + ": " + cur.size + " bytes, in hex below)\n" + (hexDump(cur.hex) || "(empty)");
        $("#conflict-diff").replaceChildren(el("div", { class: "del" }, "Your " + format + " edit cannot be diffed against it: the value is " + notOffered(cur, format) + "."));
      }
      state.conflict = cur;
      $("#save").disabled = true;
    } else if (e.status === 409 && !create && e.data && e.data.gone) {
      // (no current value: the file is gone; a 409 with neither could not
      // read the current value, the file may be there: an error below)
      $("#conflict").hidden = false;
      $("#conflict-current").hidden = true;
      $("#conflict-deleted").hidden = false;
      $("#conflict-msg").textContent = "Not saved: another writer deleted " + base.path + " (it was at version " + base.version + " when you began). Nothing was written. Create it again with your text, or discard your text.";
      state.conflict = null;
      $("#save").disabled = true;
    } else {
      showError(e.message);
      // (again, unless the text was changed since: review it first)
      $("#save").disabled = $("#editor").value !== body.value || $("#format").value !== body.format;
    }
  } finally {
    if (state.saving === edit) state.saving = null;
  }
}

// recreate creates the file whose save found it deleted, with the text
// typed; discard drops the text, closing the editor (and the file, if
// still shown: it is gone).
function recreate() {
  if ($("#conflict").hidden || $("#conflict-deleted").hidden) return;
  $("#conflict").hidden = true;
  save(true);
}

function discard() {
  const base = state.base;
  $("#conflict").hidden = true;
  closeEditor();
  if (base && state.file && state.file.path === base.path && !$("#file").hidden) {
    $("#file").hidden = true;
    state.filePane.clear();
  }
  reloadDir();
}

function rebase() {
  const cur = state.conflict;
  const mine = $("#editor").value;
  setBase(cur);
  $("#conflict").hidden = true;
  $("#editor").value = mine;
  review();
}

async function newFile() {
  const name = await ask("Create a file: give its full path", true);
  if (!name) return;
  const p = name.startsWith("/") ? name : (state.dir === "/" ? "/" : state.dir + "/") + name;
  const value = await ask("Contents of " + p + " (text)", true);
  if (value == null) return;
  // The new file is shown unless another was opened (or the pane closed,
  // or an editor opened) before the answer came.
  const asked = state.filePane.asked;
  try {
    await api("PUT", "/api/file", { path: p, version: "", format: "text", value });
    toast("created " + p);
    await reloadDir();
    if (state.filePane.asked === asked) await openFile(p);
  } catch (e) {
    // (a file created meanwhile by another writer: the store refused the
    // create, which replaces nothing; the listing shows that file)
    if (e.status === 409 && e.data && e.data.current) {
      showError("Not created: " + e.data.current.path + " exists, created by another writer meanwhile (version " + e.data.current.version + "). Nothing was written.");
      await reloadDir();
    } else showError(e.message);
  }
}

async function deleteFile() {
  const f = state.file;
  if (!(await ask("Delete the file " + f.path + " (version " + f.version + ")?"))) return;
  try {
    // (the value shown, by its SHA-256, as for a save)
    await api("DELETE", "/api/file?" + q({ path: f.path, version: f.version }), { baseSha256: f.sha256 });
    toast("deleted " + f.path);
    // The pane is hidden only if it still shows f; a file opened since
    // (asked for, not yet drawn) is still shown when it comes. An editor
    // of f is closed with it: it edited a file that is gone.
    if (state.file && state.file.path === f.path && !$("#file").hidden) {
      $("#file").hidden = true;
      state.filePane.clear();
      if (state.editing && state.base && state.base.path === f.path) closeEditor();
    }
    await reloadDir();
  } catch (e) { showError(e.message); }
}

// deleteTree deletes the directory shown and everything under it, then
// opens its parent (unless another directory was asked for meanwhile).
async function deleteTree() {
  const p = state.dir;
  const asked = state.list.asked;
  try {
    const c = await api("GET", "/api/count?" + q({ path: p }));
    // Files at reserved paths (another tool's) or under keys that are no
    // canonical path cannot be deleted from here: they stay, and are told.
    const stay = (n) => n + (n === 1 ? " file stays" : " files stay");
    const other = c.skipped ? " " + c.skipped + (c.skipped === 1 ? " other file there cannot" : " other files there cannot") +
      " be deleted from the page (at reserved paths, written by another tool, or under keys that are no canonical path): " + stay(c.skipped) + "." : "";
    if (!(await ask("Delete " + c.files + " files at or under " + p + "? This cannot be undone." + other))) return;
    const r = await api("POST", "/api/delete-tree", { path: p, count: c.files, listing: c.listing });
    toast("deleted " + r.deleted + " files under " + p + (r.skipped ? "; " + stay(r.skipped) + " (not deletable from the page)" : ""));
    if (state.list.asked === asked) await openDir(parentOf(p));
  } catch (e) { showError(e.message); }
}

// showVersion shows an earlier version of the file shown, unless another
// file was opened before the answer came.
async function showVersion(ev) {
  ev.preventDefault();
  const opened = state.filePane.opened;
  let text;
  try {
    const f = await api("GET", "/api/version?" + q({ path: state.file.path, version: $("#history-version").value }));
    text = valueText(f);
  } catch (e) {
    text = e.status === 501 ? "this store keeps no history (only etcd does)" : e.message;
  }
  if (opened === state.filePane.opened) $("#history-value").textContent = text;
}

// ---- live updates ----
// liveStates records every state the badge showed, in order (tests read it).
window.liveStates = [];

function setLive(on, text) {
  window.liveStates.push(text);
  const b = $("#live");
  b.textContent = text;
  b.className = "badge " + (on ? "live-on" : "live-off");
}

// PAUSED is what the badge says while the tab is hidden (see watch).
const PAUSED = "paused while the tab is hidden";

// watch starts the live stream of the directory dir and, if not null,
// of the file file (shown, outside dir), closing the one before. While
// the tab is hidden no stream is started (the badge says PAUSED), and a
// stream open when the tab is hidden is closed: an open stream holds one
// of the few connections (six over HTTP/1.1) a browser opens to a
// server, so pages left open in other tabs would leave none to the page
// in front, whose requests would wait for ever. When the tab is shown
// again the stream starts again, and with it a read of what the page
// shows (see "ready").
function watch(dir, file) {
  stopStream();
  state.watching = { dir, file: file || null };
  state.watchFile = file || null;
  if (document.visibilityState === "hidden") {
    state.liveFrom = Infinity;
    setLive(false, PAUSED);
    return;
  }
  const url = "/api/events?" + q(file ? { path: dir, file } : { path: dir });
  const es = new EventSource(url);
  state.events = es;
  setLive(false, "connecting…");
  // The stream tells the changes made once it is ready: those made before
  // (after the listing and the file shown were read, or while a stream was
  // down) were not streamed. So on each "ready" the page reads what it
  // shows again (and files asked for before are read again once drawn),
  // then says "live": only after the read that followed the last start (a
  // read after an earlier start may miss changes made before the last).
  state.liveFrom = Infinity;
  es.addEventListener("ready", async () => {
    if (state.events !== es) return;
    ++state.streamStarts;
    state.streamDelay = 0;
    state.allChangedAt = ++state.changeNo;
    state.changedAt.clear();
    state.pendingMore = true;
    clearTimeout(state.reloadTimer);
    state.liveFrom = state.readNo + 1;
    await applyChanges();
  });
  es.onerror = () => {
    if (state.events !== es) return;
    if (es.readyState === EventSource.CLOSED) streamRefused(es, url, dir, file);
    else setLive(false, "reconnecting…");
  };
  es.addEventListener("change", (ev) => {
    const c = JSON.parse(ev.data);
    state.pending = state.pending || new Set();
    state.changeNo++;
    if (state.changedAt.size > 1000) { state.changedAt.clear(); state.allChangedAt = state.changeNo; }
    for (const p of c.paths) { state.pending.add(p); state.changedAt.set(p, state.changeNo); }
    if (c.more) { state.pendingMore = true; state.allChangedAt = state.changeNo; }
    // Coalesce again on the page side: one reload per 300 ms at most.
    if (!state.reloadTimer) state.reloadTimer = setTimeout(applyChanges, 300);
  });
}

// stopStream closes the live stream, and drops its retry and its probe.
function stopStream() {
  if (state.events) state.events.close();
  state.events = null;
  clearTimeout(state.streamTimer);
  // (its answer no longer matters; unanswered, it would hold one of the
  // browser's few connections to the server)
  if (state.streamProbe) { state.streamProbe.onreadystatechange = null; state.streamProbe.abort(); }
  state.streamProbe = null;
}

// visibilityChanged pauses the live stream while the tab is hidden and
// starts it again when the tab is shown (see watch).
function visibilityChanged() {
  if (!state.watching) return;
  const hidden = document.visibilityState === "hidden";
  if (hidden && state.events) watch(state.watching.dir, state.watching.file);
  else if (!hidden && !state.events) watch(state.watching.dir, state.watching.file);
}

// streamRefused starts the live stream es (of url, dir and file) again
// after a delay (see backoff): the server answered it with an HTTP error,
// after which the browser does not reconnect by itself. The badge says
// why: the error of the same request asked again (an EventSource does not
// tell the answer), unless that one is answered (then the stream is
// simply started again at the end of the delay).
function streamRefused(es, url, dir, file) {
  state.streamDelay = backoff(state.streamDelay);
  clearTimeout(state.streamTimer);
  state.streamTimer = setTimeout(() => { if (state.events === es) watch(dir, file); }, state.streamDelay);
  const say = (why) => {
    if (state.events === es) setLive(false, "not live: the live stream failed" + (why ? " (" + why + ")" : "") + ", trying again");
  };
  say("");
  // (an XMLHttpRequest, not fetch: its answer, a stream when the server
  // accepts it, is not read but dropped at its status)
  const x = state.streamProbe = new XMLHttpRequest();
  let told = false;
  x.onreadystatechange = () => {
    if (told || x.readyState < XMLHttpRequest.HEADERS_RECEIVED) return;
    if (x.status === 200) { told = true; x.abort(); return; }
    if (x.readyState !== XMLHttpRequest.DONE) return;
    told = true;
    let why = x.status ? x.status + " " + x.statusText : "the server cannot be reached";
    try { why = JSON.parse(x.responseText).error || why; } catch (e) { /* not JSON: the status says why */ }
    say(why);
  };
  x.open("GET", url);
  x.send();
}

// applyChanges reads again what changed (all the page shows after a
// start of the stream, or a failed read); a read of all of it that
// succeeded, numbered liveFrom or later, makes the badge say "live" (see
// state).
async function applyChanges() {
  state.reloadTimer = null;
  clearTimeout(state.retryTimer);
  const n = ++state.readNo;
  const all = state.pendingMore;
  const changed = state.pending || new Set();
  state.pending = new Set();
  const f = state.file;
  let ok = true;
  if (f && (changed.has(f.path) || state.pendingMore) && !$("#file").hidden) ok = await reloadFile();
  state.pendingMore = state.pendingMore && !ok;
  ok = (await reloadDir(changed)) && ok;
  if (ok && all && n >= state.liveFrom && state.events && state.events.readyState === EventSource.OPEN) {
    state.retryDelay = 0;
    setLive(true, "live");
  }
}

// reloadDir reads the directory shown again, as many entries as it shows
// (a page more when it shows them all), and draws them, marking the rows
// of the paths in changed (a Set, or nothing) that are in it, unless
// search results are shown, another directory (or search) was opened
// meanwhile or a newer reload drawn (see Pane). It returns false when
// the read failed (not a 404) while the pane still shows the directory:
// the badge says so (readFailed).
async function reloadDir(changed) {
  if ($("#search-results").hidden === false) return true;
  const r = state.list.reload();
  // (a directory whose last file was deleted is gone: it lists nothing)
  const dir = state.dir;
  const rows = $("#entries tbody").children.length;
  const limit = state.next < 0 ? rows + state.pageSize : rows;
  const params = { path: dir };
  if (limit > state.pageSize) params.limit = limit;
  let data;
  try { data = await api("GET", "/api/dir?" + q(params)); } catch (e) {
    if (e.status === 404) data = { path: dir, entries: [], next: -1, total: 0 };
    else if (r.key !== state.list.key) return true;
    else { readFailed(e.message); return false; }
  }
  if (!state.list.drawReload(r)) return true;
  const flash = new Set();
  const prefix = state.dir === "/" ? "/" : state.dir + "/";
  for (const p of changed || []) {
    // (changes streamed for a directory shown before mark nothing here)
    if (!p.startsWith(prefix)) continue;
    const rest = p.slice(prefix.length);
    flash.add(prefix + rest.split("/")[0]);
  }
  $("#entries tbody").replaceChildren();
  appendEntries(data.entries, flash);
  state.next = data.next;
  $("#more").hidden = data.next < 0;
  $("#dir-title").textContent = data.path + " (" + data.total + " entries)";
  return true;
}

// ---- coordination ----
// coordination fills the tables for the path asked for last (an older
// ask's answer is dropped).
async function coordination(ev) {
  if (ev) ev.preventDefault();
  showError("");
  const seq = ++state.coordSeq;
  try {
    const c = await api("GET", "/api/coordination?" + q({ path: typedDir($("#coord-path").value) }));
    if (seq !== state.coordSeq) return;
    const fill = (sel, rows) => { const b = $(sel + " tbody"); b.replaceChildren(); for (const r of rows) b.append(el("tr", {}, ...r.map((v) => el("td", {}, v)))); };
    // A waiter or a candidate: its description (or id), else its session
    // (a Consul waiter's entry carries none), and its token.
    const who = (w) => (w.contents || (w.session ? "session " + w.session : "(no description)")) + " (token " + w.token + ")";
    const queue = (ws) => ws.length ? ws.length + ": " + ws.map(who).join(", ") : "0";
    const NOT_SHOWN = "not shown by this store";
    fill("#locks", c.locks.map((l) => [l.dir, l.holder, l.token || NOT_SHOWN, l.session || NOT_SHOWN,
      !l.age && !l.ttl ? NOT_SHOWN : "age " + (l.age ? l.age + " (since " + l.since + ")" : NOT_SHOWN) + "; TTL " + (l.ttl || NOT_SHOWN), queue(l.waiters)]));
    fill("#elections", c.elections.map((e) => [e.name, e.leaderId || "(nobody)", e.value || "", e.leaderId ? e.token : "", queue(e.candidates)]));
    fill("#semaphores", c.semaphores.map((s) => [s.dir, s.limit, s.holders.map((h, i) => h + " (" + s.tokens[i] + ")").join(", ")]));
  } catch (e) { if (seq === state.coordSeq) showError(e.message); }
}

// ---- compare ----
// compare shows the comparison asked for last (an older ask's answer is
// dropped).
async function compare(ev) {
  ev.preventDefault();
  showError("");
  const seq = ++state.compareSeq;
  const res = $("#compare-results");
  res.replaceChildren();
  try {
    const c = await api("GET", "/api/compare?" + q({ a: typedDir($("#compare-a").value), b: typedDir($("#compare-b").value), store: $("#compare-store").value }));
    if (seq !== state.compareSeq) return;
    // Files that cannot be compared (at reserved paths, or under keys
    // that are no canonical path) are named, as topoctl diff names them.
    const skipped = (c.notComparedA || []).concat(c.notComparedB || []);
    $("#compare-summary").textContent = c.differences.length + " differences between " + c.a + " (" + c.filesA + " files) and " + c.b + " (" + c.filesB + " files)" + (c.truncated ? ", first ones shown" : "") +
      (skipped.length ? "; " + skipped.length + " files not compared (at reserved paths, or under keys that are no canonical path)" : "") +
      (c.filesA === 0 && c.filesB === 0 && !skipped.length ? ": neither holds any file (check the paths)" : "");
    for (const p of skipped) {
      res.append(el("div", { class: "cmp-item", "data-path": p },
        el("div", {}, el("span", { class: "kind-not-compared" }, "not compared"), " ", el("code", {}, p))));
    }
    for (const d of c.differences) {
      const side = (f) => el("pre", { class: "value" }, f ? valueText(f) : "(absent)");
      res.append(el("div", { class: "cmp-item", "data-path": d.path },
        el("div", {}, el("span", { class: "kind-" + d.kind }, d.kind), " ", el("code", {}, d.path)),
        el("div", { class: "cmp-sides" }, side(d.a), side(d.b))));
    }
  } catch (e) { if (seq === state.compareSeq) showError(e.message); }
}

// ---- read cache ----
// cacheBadge shows the health of the read cache the page's files come
// from (healthy, resyncing, stale or over-limit, and since when); the
// badge stays hidden when there is no cache. An answer older than the
// one shown (the badge asks every second) is dropped.
async function cacheBadge() {
  const seq = ++state.cacheSeq;
  let c;
  try { c = await api("GET", "/api/cache"); } catch (_) { return; }
  if (seq < state.cacheShown) return;
  state.cacheShown = seq;
  const b = $("#cache");
  b.hidden = !c.cache;
  if (!c.cache) return;
  const healthy = c.health === "healthy";
  b.textContent = "cache " + c.health + (healthy ? "" : " since " + c.since);
  b.className = "badge " + (healthy ? "live-on" : "live-off");
  b.title = c.files + " files, " + c.bytes + " bytes in memory; store last answered " + c.confirmed + (c.err ? "; " + c.err : "");
}

// ---- wiring ----
function switchView(v) {
  for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.view === v);
  for (const s of document.querySelectorAll(".view")) s.hidden = s.id !== "view-" + v;
  if (v === "coordination") coordination();
}

document.addEventListener("DOMContentLoaded", async () => {
  for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => switchView(b.dataset.view));
  for (const b of document.querySelectorAll(".subtab")) b.addEventListener("click", () => show(b.dataset.show));
  document.addEventListener("visibilitychange", visibilityChanged);
  $("#pathbar").addEventListener("submit", (ev) => { ev.preventDefault(); openDir(typedDir($("#path").value)); });
  $("#searchbar").addEventListener("submit", (ev) => { ev.preventDefault(); search($("#search").value); });
  $("#up").addEventListener("click", () => openDir(parentOf(state.dir)));
  $("#more").addEventListener("click", more);
  $("#copy-path").addEventListener("click", async () => {
    const p = state.file && state.file.path;
    try { await navigator.clipboard.writeText(p); toast("copied " + p); } catch (_) { toast(p); }
  });
  $("#history-form").addEventListener("submit", showVersion);
  $("#coord-form").addEventListener("submit", coordination);
  $("#compare-form").addEventListener("submit", compare);
  if (writable) {
    $("#edit").addEventListener("click", () => openEditor());
    $("#cancel-edit").addEventListener("click", closeEditor);
    $("#review").addEventListener("click", review);
    $("#save").addEventListener("click", () => save(false));
    $("#recreate").addEventListener("click", recreate);
    $("#discard").addEventListener("click", discard);
    $("#rebase").addEventListener("click", rebase);
    $("#format").addEventListener("change", () => { $("#editor").value = currentAs(state.base, $("#format").value); review(); });
    $("#editor").addEventListener("input", () => { $("#save").disabled = true; });
    $("#new-file").addEventListener("click", newFile);
    $("#delete-file").addEventListener("click", deleteFile);
    $("#delete-tree").addEventListener("click", deleteTree);
  }
  try {
    const info = await api("GET", "/api/info");
    if (info.pageSize > 0) state.pageSize = info.pageSize;
    for (const n of info.stores) $("#compare-store").append(el("option", { value: n }, n));
  } catch (e) { showError(e.message); }
  cacheBadge();
  setInterval(cacheBadge, 1000);
  const start = hashPath(location.hash) || "/";
  await openDir(start);
  document.body.dataset.ready = "true";
});
