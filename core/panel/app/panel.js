// The clawless control panel. Plain script, no library: every text from the bot's stores is
// put on the page with textContent (never as markup), so nothing it holds can run.
"use strict";

const state = { auth: null, csrf: null, me: null };

// Inside Telegram the launch data arrives in the URL's fragment (tgWebAppData); it is kept for
// this tab only and the fragment removed from the address bar.
function launch() {
  const hash = new URLSearchParams(location.hash.slice(1));
  const data = hash.get("tgWebAppData");
  if (data) {
    sessionStorage.setItem("tma", data);
    theme(hash.get("tgWebAppThemeParams"));
    history.replaceState(null, "", location.pathname);
  }
  state.auth = sessionStorage.getItem("tma");
  if (state.auth) {
    document.documentElement.classList.add("tg");
    theme(sessionStorage.getItem("tma-theme"));
  }
}

// Telegram's theme colours, only values that are colours.
function theme(json) {
  if (!json) return;
  let params;
  try { params = JSON.parse(json); } catch { return; }
  sessionStorage.setItem("tma-theme", json);
  const names = {
    bg_color: "--tg-bg", text_color: "--tg-text", hint_color: "--tg-hint",
    link_color: "--tg-link", button_color: "--tg-button",
    button_text_color: "--tg-button-text", secondary_bg_color: "--tg-secondary-bg",
  };
  for (const [k, v] of Object.entries(names)) {
    const c = params[k];
    if (typeof c === "string" && /^#[0-9a-fA-F]{3,8}$/.test(c)) {
      document.documentElement.style.setProperty(v, c);
    }
  }
}

async function api(method, path, body) {
  const headers = {};
  if (state.auth) headers["Authorization"] = "tma " + state.auth;
  else if (state.csrf && method !== "GET") headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const r = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  let data = null;
  try { data = await r.json(); } catch { data = null; }
  if (!r.ok) {
    const why = (data && typeof data.error === "string") ? data.error : ("error " + r.status);
    const e = new Error(why);
    e.status = r.status;
    throw e;
  }
  return data;
}

// Builds an element: el("p", {class: "hint"}, "text", child, …). Strings become text nodes.
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "onclick") e.addEventListener("click", v);
    else if (k === "onsubmit") e.addEventListener("submit", v);
    else e.setAttribute(k, v);
  }
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
  }
  return e;
}

function show(...nodes) {
  const view = document.getElementById("view");
  view.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
}

function say(text) {
  document.getElementById("status").textContent = text;
}

function when(ms) {
  return new Date(ms).toLocaleString();
}

// "Name @username · id" of a pairing's person.
function person(p) {
  if (!p) return "?";
  return (p.name || "") + (p.username ? " @" + p.username : "") + " · " + p.id;
}

function dollars(micros) {
  return "$" + (micros / 1e6).toFixed(4);
}

async function guarded(f) {
  try { say(""); await f(); }
  catch (e) {
    if (e.status === 401) {
      show(el("p", {}, "You are signed out. Open the panel again from the bot, or send /panel in a private chat for a browser link."));
    } else {
      say(e.message);
    }
  }
}

const tabs = {
  async memory() {
    const form = el("form", { class: "row" });
    const q = el("input", { class: "grow", type: "search", placeholder: "Search your memory", name: "q" });
    form.append(q, el("button", { type: "submit" }, "Search"));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      guarded(() => memorySearch(form, q.value));
    });
    const data = await api("GET", "/api/memory");
    const list = [];
    for (const s of data.scopes) {
      list.push(el("h2", {}, "Agent " + s.agent));
      for (const f of s.files) {
        list.push(el("div", { class: "card row" },
          el("span", { class: "grow" }, f),
          el("button", { class: "quiet", onclick: () => guarded(() => memoryFile(s.agent, f)) }, "Open")));
      }
    }
    if (list.length === 0) list.push(el("p", { class: "hint" }, "Nothing in memory yet. Ask the bot to remember something."));
    show(form, ...list);
  },
  async files() {
    const data = await api("GET", "/api/files");
    const list = [];
    for (const w of data.workspaces) {
      list.push(el("h2", {}, "Agent " + w.agent));
      for (const f of w.files) {
        list.push(el("div", { class: "card row" },
          el("span", { class: "grow" }, f),
          el("button", { class: "quiet", onclick: () => guarded(() => workspaceFile(w.agent, f)) }, "Open")));
      }
      if (w.more) list.push(el("p", { class: "hint" }, "More files than shown."));
    }
    if (list.length === 0) list.push(el("p", { class: "hint" }, "No files yet. The bot's file tools keep what they write here."));
    show(el("h2", {}, "Your files"), ...list);
  },
  async conversations() {
    const data = await api("GET", "/api/conversations");
    const rows = data.conversations.map((x) => el("div", { class: "card row" },
      el("div", { class: "grow" }, el("div", {}, x.key),
        el("div", { class: "hint" }, x.messages + " messages · " + (x.updated_ms ? when(x.updated_ms) : ""))),
      el("button", { class: "quiet", onclick: () => guarded(() => conversation(x.key)) }, "Open")));
    show(el("h2", {}, "Conversations"), ...(rows.length ? rows : [el("p", { class: "hint" }, "No conversation yet.")]));
  },
  async reminders() {
    const data = await api("GET", "/api/reminders");
    const rows = data.reminders.map((r) => el("div", { class: "card row" },
      el("div", { class: "grow" },
        el("div", {}, r.text),
        el("div", { class: "hint" }, (r.watch ? "watching " + r.watch.url + " every " + r.watch.every + " · next check " : "next ") + when(r.next_ms) + (r.cron ? " · " + r.cron + " (" + r.zone + ")" : ""))),
      el("button", { class: "danger", onclick: () => guarded(async () => {
        await api("DELETE", "/api/reminders/" + encodeURIComponent(r.id));
        say("Reminder cancelled.");
        await tabs.reminders();
      }) }, "Cancel")));
    show(el("h2", {}, "Reminders"), ...(rows.length ? rows : [el("p", { class: "hint" }, "No reminders.")]));
  },
  async usage() {
    const u = await api("GET", "/api/usage");
    // Input counts what the prompt cache held (cached_input) and what it did not (input).
    const tokensIn = (t) => t.input + (t.cached_input || 0);
    const cached = (t) => (tokensIn(t) ? Math.round((100 * (t.cached_input || 0)) / tokensIn(t)) + " %" : "–");
    const table = el("table", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "calls"), el("th", {}, "tokens in"), el("th", {}, "from cache"), el("th", {}, "tokens out"), el("th", {}, "cost")));
    const line = (name, t) => table.append(el("tr", {}, el("td", {}, name), el("td", {}, t.calls), el("td", {}, tokensIn(t)), el("td", {}, cached(t)), el("td", {}, t.output), el("td", {}, dollars(t.cost_micros))));
    line("You, today", u.today);
    line("You, this month", u.month);
    if (u.everyone) {
      line("Everyone, today", u.everyone.today);
      line("Everyone, this month", u.everyone.month);
    }
    const days = (await api("GET", "/api/usage/days?days=14")).days;
    const chart = bars(days.map((d) => ({ label: d.day.slice(5), value: (d.everyone || d.you).cost_micros, tokens: tokensIn(d.everyone || d.you) + (d.everyone || d.you).output })));
    const split = (title, rows, sorted = true) => {
      const sums = new Map();
      for (const [name, t] of rows) {
        const s = sums.get(name) || { calls: 0, input: 0, cached_input: 0, output: 0, cost_micros: 0 };
        s.calls += t.calls; s.input += t.input; s.cached_input += t.cached_input || 0;
        s.output += t.output; s.cost_micros += t.cost_micros;
        sums.set(name, s);
      }
      if (!sums.size) return [];
      const all = [...sums.entries()];
      const order = sorted ? all.sort((a, b) => b[1].cost_micros - a[1].cost_micros || tokensIn(b[1]) - tokensIn(a[1])) : all;
      const lines = order.map(([name, s]) => el("tr", {}, el("td", {}, name), el("td", {}, s.calls), el("td", {}, tokensIn(s) + s.output), el("td", {}, cached(s)), el("td", {}, dollars(s.cost_micros))));
      return [el("h2", {}, title + ", last 14 days"),
        el("table", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "calls"), el("th", {}, "tokens"), el("th", {}, "input from cache"), el("th", {}, "cost")), ...lines)];
    };
    const each = (f) => days.flatMap((d) => (f(d) || []));
    show(el("h2", {}, "Usage"), table,
      el("h2", {}, (days[0] && days[0].everyone ? "Everyone" : "You") + ", last 14 days"), chart,
      ...split("Per day", days.filter((d) => (d.everyone || d.you).calls).map((d) => [d.day, d.everyone || d.you]), false),
      ...split("Per person", each((d) => d.people && d.people.map((p) => [String(p.id), p.tally]))),
      ...split("Per agent", each((d) => d.models && d.models.map((m) => [m.agent, m.tally]))),
      ...split("Per model", each((d) => d.models && d.models.map((m) => [m.model, m.tally]))));
  },
  async approvals() {
    const a = await api("GET", "/api/approvals");
    const answer = (x, choice) => guarded(async () => {
      await api("POST", "/api/approvals", { lane: x.lane, id: x.id, answer: choice });
      say(choice === "deny" ? "Denied." : "Allowed.");
      await tabs.approvals();
    });
    const cards = a.approvals.map((x) => el("div", { class: "card" },
      el("div", {}, x.tool),
      el("pre", {}, x.args),
      x.why ? el("div", { class: "hint" }, "Asked because " + x.why) : null,
      el("div", { class: "hint" }, "asked by " + x.asker + " · expires " + when(x.expires_ms) + " · trace " + x.trace),
      el("div", { class: "row" },
        el("button", { onclick: () => answer(x, "once") }, "Allow once"),
        el("button", { class: "quiet", onclick: () => answer(x, "while") }, "Allow for a while"),
        el("button", { class: "danger", onclick: () => answer(x, "deny") }, "Deny"))));
    show(el("h2", {}, "Waiting for your approval"), ...(cards.length ? cards : [el("p", { class: "hint" }, "Nothing waits.")]));
  },
  async pairing() {
    const p = await api("GET", "/api/pairing");
    const pending = p.pending.map((c) => el("div", { class: "card row" },
      el("span", { class: "grow" }, c.code + " · " + person(c.person)),
      el("button", { onclick: () => guarded(async () => {
        await api("POST", "/api/pairing/approve", { code: c.code });
        say("Approved.");
        await tabs.pairing();
      }) }, "Approve")));
    const paired = p.paired.map((x) => el("div", { class: "card row" },
      el("span", { class: "grow" }, person(x.person)),
      el("button", { class: "danger", onclick: () => guarded(async () => {
        await api("POST", "/api/pairing/remove", { user: x.person.id });
        say("Removed.");
        await tabs.pairing();
      }) }, "Remove")));
    show(el("h2", {}, "Waiting for approval"), ...(pending.length ? pending : [el("p", { class: "hint" }, "No codes waiting.")]),
      el("h2", {}, "Paired"), ...(paired.length ? paired : [el("p", { class: "hint" }, "Nobody paired.")]),
      el("h2", {}, "From the configuration"), el("p", {}, p.configured.join(", ")));
  },
  async audit() {
    const a = await api("GET", "/api/audit?since=24h");
    const traces = new Map();
    for (const e of a.entries) {
      const k = e.trace;
      if (!traces.has(k)) traces.set(k, []);
      traces.get(k).push(e);
    }
    const cards = [...traces.entries()].reverse().map(([trace, steps]) => el("div", { class: "card" },
      el("div", { class: "hint" }, "trace " + trace + " · chat " + steps[0].chat + " · " + when(steps[0].at_ms)),
      ...steps.map((s) => el("pre", {}, JSON.stringify(s, null, 1)))));
    show(el("h2", {}, "Audit trail, last 24 h"), ...(cards.length ? cards : [el("p", { class: "hint" }, "Nothing in the last 24 hours.")]));
  },
  async health() {
    const h = await api("GET", "/api/health");
    const lanes = h.overview.lanes.map((l) => el("tr", {}, el("td", {}, l.lane), el("td", {}, l.jobs),
      el("td", {}, l.waiting_for ? "waits for " + l.waiting_for : l.attempts ? l.attempts + " failed, next " + when(l.not_before_ms) : "")));
    const errors = h.errors.map((e) => el("div", { class: "card" },
      el("div", { class: "hint" }, when(e.at_ms) + " · trace " + e.trace),
      el("div", {}, e.type + ": " + [e.model, e.tool, e.outcome, e.reason].filter(Boolean).join(" · "))));
    show(el("h2", {}, "Last errors"), ...(errors.length ? errors : [el("p", { class: "hint" }, "None in the last minutes.")]),
      el("h2", {}, "Backlog"), lanes.length ? el("table", {}, el("tr", {}, el("th", {}, "lane"), el("th", {}, "jobs"), el("th", {}, "")), ...lanes) : el("p", { class: "hint" }, "Nothing waits."),
      el("h2", {}, "Details"), el("pre", {}, JSON.stringify(h, null, 2)));
  },
  async config() {
    const c = await api("GET", "/api/config");
    show(el("h2", {}, "Configuration (secrets redacted)"), el("pre", {}, JSON.stringify(c, null, 2)));
  },
  async hooks() {
    const data = await api("GET", "/api/hooks");
    const cards = data.hooks.map((x) => el("div", { class: "card" },
      el("div", {}, "POST /hooks/" + x.name),
      el("div", { class: "hint" }, (x.mode === "turn" ? "a turn" : "a message") + " in chat " + x.chat),
      el("div", { class: "hint" }, x.secret_set
        ? "secret set (" + x.secret_env + ")"
        : "secret not set: set " + x.secret_env + ", or every delivery is refused with 401")));
    show(el("h2", {}, "Incoming webhooks"), ...(cards.length ? cards : [el("p", { class: "hint" }, "No hooks. Add them under hooks: in main.yaml.")]));
  },
  async account() {
    const me = state.me;
    const out = (everywhere) => guarded(async () => {
      await api("POST", "/api/signout", { everywhere });
      sessionStorage.removeItem("tma");
      state.auth = null;
      show(el("p", {}, everywhere ? "Signed out everywhere." : "Signed out."));
      document.getElementById("tabs").hidden = true;
    });
    show(el("h2", {}, "Account"),
      el("p", {}, "Signed in as " + (me.name || "user") + " (" + me.id + ") on bot " + me.connector + (me.owner ? ", its owner." : ".")),
      el("div", { class: "row" },
        el("button", { class: "quiet", onclick: () => out(false) }, "Sign out"),
        el("button", { class: "danger", onclick: () => out(true) }, "Sign out everywhere")));
  },
};

// A bar chart of `items` ({label, value, tokens}) as SVG, drawn with DOM calls only.
function bars(items) {
  const ns = "http://www.w3.org/2000/svg";
  const w = 320, h = 120, gap = 4;
  const max = Math.max(1, ...items.map((i) => i.value || i.tokens));
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 " + w + " " + (h + 16));
  svg.setAttribute("class", "chart");
  svg.setAttribute("role", "img");
  const bw = (w - gap * items.length) / Math.max(1, items.length);
  items.forEach((it, i) => {
    const v = it.value || it.tokens;
    const bh = Math.round((v / max) * h);
    const r = document.createElementNS(ns, "rect");
    r.setAttribute("x", String(i * (bw + gap)));
    r.setAttribute("y", String(h - bh));
    r.setAttribute("width", String(bw));
    r.setAttribute("height", String(Math.max(bh, 1)));
    const t = document.createElementNS(ns, "title");
    t.textContent = it.label + ": " + (it.value ? dollars(it.value) : it.tokens + " tokens");
    r.append(t);
    svg.append(r);
    if (i % 2 === 0) {
      const l = document.createElementNS(ns, "text");
      l.setAttribute("x", String(i * (bw + gap)));
      l.setAttribute("y", String(h + 13));
      l.textContent = it.label;
      svg.append(l);
    }
  });
  return svg;
}

async function conversation(key) {
  const c = await api("GET", "/api/conversations/messages?key=" + encodeURIComponent(key));
  const items = c.messages.map((m) => el("div", { class: "card" },
    el("div", { class: "hint" }, m.parts.length && m.parts.every((p) => p.result !== undefined) ? "tool result" : m.role),
    ...m.parts.map((p) => p.text !== undefined ? el("div", { class: "said" }, p.text)
      : p.tool !== undefined ? el("div", { class: "hint" }, "tool " + p.tool + (p.input ? " " + p.input : ""))
      : el("pre", {}, (p.error ? "error: " : "") + p.result))));
  show(el("h2", {}, key), c.summary ? el("p", { class: "hint" }, "Summary: " + c.summary) : null,
    ...items, el("button", { class: "quiet", onclick: () => guarded(tabs.conversations) }, "Back"));
}

async function memorySearch(form, words) {
  const data = await api("GET", "/api/memory?q=" + encodeURIComponent(words));
  const hits = data.hits.map((h) => el("div", { class: "card" },
    el("div", { class: "hint" }, h.agent + " · " + h.path + ":" + h.line + " · ", el("span", { class: "score" }, "score " + Number(h.score).toFixed(3))),
    el("div", {}, h.text)));
  show(form, el("h2", {}, "Results"), ...(hits.length ? hits : [el("p", { class: "hint" }, "Nothing matches.")]));
}

async function memoryFile(agent, path) {
  const q = "?agent=" + encodeURIComponent(agent) + "&path=" + encodeURIComponent(path);
  const f = await api("GET", "/api/memory/file" + q);
  const text = el("textarea", { "aria-label": path });
  text.value = f.text;
  show(el("h2", {}, path),
    text,
    el("div", { class: "row" },
      el("button", { onclick: () => guarded(async () => {
        await api("PUT", "/api/memory/file" + q, { text: text.value });
        say("Saved.");
      }) }, "Save"),
      deleteButton("/api/memory/file" + q, tabs.memory),
      el("button", { class: "quiet", onclick: () => guarded(tabs.memory) }, "Back")));
}

// A button that deletes what `path` names on a second tap (no dialog: Telegram's web views
// do not all show one), then shows `back`.
function deleteButton(path, back) {
  return el("button", { class: "danger", onclick: (ev) => guarded(async () => {
    if (ev.target.dataset.sure !== "1") {
      ev.target.dataset.sure = "1";
      ev.target.textContent = "Tap again to delete";
      return;
    }
    await api("DELETE", path);
    say("Deleted.");
    await back();
  }) }, "Delete");
}

async function workspaceFile(agent, path) {
  const q = "?agent=" + encodeURIComponent(agent) + "&path=" + encodeURIComponent(path);
  const f = await api("GET", "/api/files/file" + q);
  const body = f.text === null
    ? el("p", { class: "hint" }, "Not text: " + f.size + " bytes.")
    : el("pre", {}, f.text + (f.cut ? "\n… (cut; " + f.size + " bytes in all)" : ""));
  show(el("h2", {}, path), body,
    el("div", { class: "row" },
      deleteButton("/api/files/file" + q, tabs.files),
      el("button", { class: "quiet", onclick: () => guarded(tabs.files) }, "Back")));
}

function open(name) {
  for (const b of document.querySelectorAll("#tabs button")) {
    if (b.dataset.tab === name) b.setAttribute("aria-current", "page");
    else b.removeAttribute("aria-current");
  }
  guarded(tabs[name]);
}

async function start() {
  launch();
  await guarded(async () => {
    const me = await api("GET", "/api/me");
    state.me = me;
    state.csrf = me.csrf || null;
    document.getElementById("who").textContent = (me.name || String(me.id)) + (me.owner ? " · owner" : "");
    const nav = document.getElementById("tabs");
    for (const b of nav.querySelectorAll("button")) {
      if (b.hasAttribute("data-owner")) b.hidden = !me.owner;
      b.addEventListener("click", () => open(b.dataset.tab));
    }
    nav.hidden = false;
    open("memory");
  });
}

document.addEventListener("DOMContentLoaded", start);
