// The tern node's web page: the node's HTTP API (docs/API.md), used with
// the session cookie that tern ui's one-time code gave, and the session's
// CSRF token on every request that changes something. No bearer token
// ever reaches this page.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { csrf: "", peer: "", peers: [], agent: "", session: "", turn: "", sources: [], followed: new Set(), seen: new Set(), actionsFor: "" };

// api calls the node's API; a refusal throws an Error with its message.
async function api(method, path, body) {
  const opts = { method, headers: {}, credentials: "same-origin" };
  if (method !== "GET") opts.headers["X-CSRF-Token"] = state.csrf;
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  const text = await resp.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch (e) {
    data = { error: text.trim() || resp.statusText };
  }
  if (resp.status === 401 && path !== "/ui/session") {
    loggedOut();
  }
  if (!resp.ok) {
    const err = new Error((data && data.error) || resp.statusText);
    err.status = resp.status;
    err.data = data;
    throw err;
  }
  return data;
}

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else if (k === "class") e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

function short(id) { return id ? "…" + id.slice(-6) : ""; }

// plural is "1 turn", "2 turns".
function plural(n, word) { return `${n} ${word}${n === 1 ? "" : "s"}`; }

function banner(text, kind) {
  $("banner").textContent = text;
  $("banner").dataset.kind = kind || "";
  $("banner").hidden = !text;
}

// loggedOut shows the login hint: the session ended (it expired, the node
// restarted, or the person logged out elsewhere).
function loggedOut() {
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  banner("");
  closeStreams();
}

async function start() {
  try {
    const s = await api("GET", "/ui/session");
    state.csrf = s.csrf;
    state.peer = s.peer_id;
  } catch (e) {
    $("login").hidden = false;
    return;
  }
  $("node").textContent = "node " + state.peer;
  $("main").hidden = false;
  $("logout").hidden = false;
  $("logout").addEventListener("click", async () => {
    try {
      await api("POST", "/ui/logout");
    } catch (e) {
      banner(e.message);
      return;
    }
    location.reload();
  });
  $("new-session").addEventListener("click", newSession);
  $("turn-form").addEventListener("submit", sendTurn);
  $("migrate-form").addEventListener("submit", migrate);
  await refresh();
  setInterval(refresh, 3000);
}

// refresh reloads the peers, the agents and the selected agent's panel.
async function refresh() {
  let status;
  try {
    status = await api("GET", "/v1/status");
  } catch (e) {
    if (e.status !== 401) banner("The node does not answer: " + e.message, "unreachable");
    return;
  }
  if ($("banner").dataset.kind === "unreachable") banner("");
  state.peers = status.peers || [];
  let waiting = {};
  try {
    for (const a of await api("GET", "/v1/actions")) waiting[a.agent] = (waiting[a.agent] || 0) + 1;
  } catch (e) {
    waiting = {};
  }
  $("peers").replaceChildren(...state.peers.map((p) =>
    el("li", { "data-peer": p.id }, (p.name || short(p.id)) + " ",
      el("span", { class: p.connected ? "on" : "off" }, p.connected ? "connected" : "not connected" + (p.why ? ": " + p.why : "")))));
  const chosen = $("migrate-to").value; // kept across refreshes
  $("migrate-to").replaceChildren(...state.peers.map((p) => el("option", { value: p.id }, p.name || short(p.id))));
  if (chosen && state.peers.some((p) => p.id === chosen)) $("migrate-to").value = chosen;
  state.names = Object.fromEntries((status.capsules || []).map((c) => [c.id, c.name]));
  if (!(status.capsules || []).length) {
    $("capsules").replaceChildren(el("li", { class: "muted hint" },
      "No agent here yet. Make one with tern capsule new ./agent --name helper, then give it to this node with tern capsule import ./agent."));
  } else {
    $("capsules").replaceChildren(...status.capsules.map((c) =>
      el("li", { "data-agent": c.id },
        el("button", { type: "button", onclick: () => selectAgent(c.id) }, c.name || c.id),
        el("span", { class: "muted" }, ` ${short(c.id)} · ${plural(c.events, "event")}` + (c.runs ? " · runs here" : "") + (c.wants ? ` · ${plural(c.wants, "blob")} to come` : "")),
        waiting[c.id] ? el("strong", { class: "waiting" }, ` · ${waiting[c.id]} waiting for you`) : "")));
  }
  if (state.agent) await showAgent();
}

async function selectAgent(id) {
  state.agent = id;
  state.session = "";
  $("session-panel").hidden = true;
  closeStreams();
  await showAgent();
}

async function showAgent() {
  const id = state.agent;
  $("agent-panel").hidden = false;
  const name = (state.names || {})[id];
  $("agent-title").textContent = name ? `${name} (${short(id)})` : "Agent " + id;
  try {
    const h = await api("GET", `/v1/capsules/${id}/holder`);
    const holder = h.holder || {};
    const here = holder.peer === state.peer;
    $("holder").textContent = `Held at epoch ${holder.epoch} by ${here ? "this node" : peerName(holder.peer)}; here it is ${h.state}.` +
      (here ? "" : ` It runs on ${peerName(holder.peer)}: open that node's page to talk to it.`);
    // What only the node that runs the agent can do is not offered on a copy.
    for (const f of ["migrate-form", "new-session", "turn-form"]) $(f).hidden = !here;
    if (!here && holder.peer && state.session) banner(`The agent runs on ${peerName(holder.peer)} now: its turns go on there; this page shows this node's copy.`);
  } catch (e) {
    $("holder").textContent = "Holder: " + e.message;
  }
  const lines = [];
  for (const p of state.peers.filter((p) => p.connected)) {
    try {
      const s = await api("GET", `/v1/capsules/${id}/sync?peer=${encodeURIComponent(p.id)}`);
      lines.push(`${peerName(p.id)}: ` + (s.events ? "holds every event" : "events still to send") +
        (s.events && s.blobs ? `, ${s.blobs - s.peer_lacks} of ${s.blobs} blobs` : "") + ((s.transfers || []).length ? `, ${s.transfers.length} moving now` : ""));
    } catch (e) {
      lines.push(`${peerName(p.id)}: ${e.message}`);
    }
  }
  $("sync").textContent = lines.length ? "Sync with " + lines.join("; ") + "." : "No paired peer is connected.";
  try {
    const sessions = await api("GET", `/v1/agents/${id}/sessions`);
    $("sessions").replaceChildren(...sessions.map((s) =>
      el("li", { "data-session": s.id },
        el("button", { type: "button", onclick: () => selectSession(s.id) }, s.preview ? `“${s.preview}”` : s.id),
        el("span", { class: "muted" }, ` ${plural(s.turns, "turn")}` + (s.status ? ` · ${s.status}` : "")),
        s.status === "paused" ? el("strong", { class: "waiting" }, " · waits for you") : "")));
  } catch (e) {
    $("sessions").replaceChildren(el("li", { class: "muted" }, e.message));
  }
  if (state.session) await showSession();
}

function peerName(id) {
  const p = state.peers.find((p) => p.id === id);
  return p && p.name ? `${p.name} (${short(id)})` : short(id);
}

async function newSession() {
  try {
    const s = await api("POST", `/v1/agents/${state.agent}/sessions`);
    await showAgent();
    await selectSession(s.id);
  } catch (e) {
    banner(e.message);
  }
}

async function selectSession(id) {
  if (state.session !== id) {
    state.session = id;
    state.turn = "";
    state.actionsFor = "";
    closeStreams();
    $("transcript").replaceChildren();
    state.seen.clear();
  }
  $("session-panel").hidden = false;
  await showSession();
}

async function showSession() {
  $("session-title").textContent = "Session " + state.session;
  let turns = [];
  try {
    turns = await api("GET", `/v1/sessions/${state.session}/turns`);
  } catch (e) {
    banner(e.message);
    return;
  }
  $("turns").replaceChildren(...turns.map((t) => el("li", { "data-turn": t.id, "data-status": t.status },
    t.status === "paused" && t.continued_by ? `${t.id}: answered, continued by ${t.continued_by}` : `${t.id}: ${t.status}`)));
  const last = turns[turns.length - 1];
  followInOrder(turns.map((t) => t.id));
  showActions(last);
}

// followInOrder shows the session's turns one after the other, each
// stream opened when the one before ended, so their items never
// interleave.
async function followInOrder(ids) {
  if (state.following) return;
  state.following = true;
  const session = state.session;
  try {
    for (const id of ids) {
      if (state.session !== session) return;
      if (!state.followed.has(id)) await follow(id);
    }
  } finally {
    state.following = false;
  }
}

// follow streams a turn's events into the transcript, each once: the
// EventSource resumes by itself with Last-Event-ID after a dropped
// connection, and an item already shown is never shown again. It resolves
// when the turn's stream has ended.
function follow(turnID) {
  state.followed.add(turnID);
  state.turn = turnID;
  const session = state.session;
  return new Promise((resolve) => {
    const src = new EventSource(`/v1/sessions/${session}/turns/${turnID}/events`);
    state.sources.push(src);
    const end = () => {
      src.close();
      state.sources = state.sources.filter((s) => s !== src);
      resolve();
    };
    const onItem = (ev) => {
      if (state.session !== session) return end();
      const key = turnID + ":" + ev.lastEventId;
      if (ev.lastEventId && state.seen.has(key)) return;
      if (ev.lastEventId) state.seen.add(key);
      $("streaming").textContent = "";
      showEvent(ev.type, JSON.parse(ev.data));
      if (ev.type === "turn.ended") {
        end();
        showSession();
      }
    };
    for (const type of ["message", "reasoning", "tool_call", "tool_result", "turn.started", "turn.ended", "action.answered", "operation.intent", "operation.outcome", "workspace.snapshot", "note"]) {
      src.addEventListener(type, onItem);
    }
    src.addEventListener("delta", (ev) => {
      const d = JSON.parse(ev.data);
      if (d.kind === "text" || d.kind === "reasoning") $("streaming").textContent += d.text;
    });
    src.addEventListener("moved", (ev) => {
      end();
      banner(`The agent moved to ${peerName(JSON.parse(ev.data).peer)}: the turn goes on there.`);
    });
    src.onerror = () => {
      if (src.readyState === EventSource.CLOSED) { // refused, not dropped: a dropped stream reconnects by itself
        end();
        api("GET", "/ui/session").catch(loggedOut);
      }
    };
  });
}

function closeStreams() {
  for (const src of state.sources) src.close();
  state.sources = [];
  state.followed = new Set();
}

function textOf(content) {
  return (content || []).map((p) => (p.type === "text" ? p.text : `[${p.type} ${p.media_type || ""}]`)).join("\n");
}

function showEvent(type, e) {
  const b = e.body || {};
  let item;
  switch (type) {
    case "message":
      item = el("div", { class: "item " + b.role }, el("span", { class: "kind" }, b.role), textOf(b.content));
      break;
    case "tool_call":
      item = el("div", { class: "item tool" }, el("span", { class: "kind" }, "call"), `${b.name} ${JSON.stringify(b.arguments)}`);
      break;
    case "tool_result":
      item = el("div", { class: "item tool" }, el("span", { class: "kind" }, b.is_error ? "error" : "result"), textOf(b.content));
      break;
    case "turn.ended":
      item = el("div", { class: "item muted" }, el("span", { class: "kind" }, "turn"), `${b.status}${b.error ? ": " + b.error : ""}`);
      break;
    default:
      return;
  }
  item.dataset.event = e.id;
  $("transcript").append(item);
  $("transcript").scrollTop = $("transcript").scrollHeight;
}

// showActions offers the answers a paused turn waits for: approve or deny
// any; the output of a client-side tool; the authorization of an MCP
// server. A paused turn takes all its answers at once, so the continuing
// turn starts when the last is given.
function showActions(turn) {
  const box = $("actions");
  const paused = turn && turn.status === "paused" ? turn.id : "";
  if (paused === state.actionsFor) return; // the same question: keep the answers given so far
  state.actionsFor = paused;
  box.replaceChildren();
  if (!paused) return;
  const actions = turn.required_actions || [];
  const answers = {};
  const answer = (a, row, response) => {
    answers[a.id] = Object.assign({ action_id: a.id }, response);
    row.dataset.answer = response.approve === false ? "deny" : "given";
    if (Object.keys(answers).length === actions.length) startTurn({ responses: actions.map((a) => answers[a.id]) });
  };
  for (const a of actions) {
    const row = el("div", { class: "action", "data-action": a.id, "data-kind": a.kind });
    const deny = el("button", { type: "button", class: "deny", onclick: () => answer(a, row, { approve: false }) }, a.kind === "reconcile" ? "It did not happen" : "Deny");
    if (a.kind === "client_output") {
      const out = el("input", { type: "text", class: "output", placeholder: "the tool's output, as JSON", size: "40" });
      row.append(`${a.tool} ${JSON.stringify(a.arguments || {})} runs on your side: `, out, " ",
        el("button", { type: "button", class: "respond", onclick: () => {
          try { answer(a, row, { output: JSON.parse(out.value) }); } catch (e) { banner("The output must be JSON (a string in quotes): " + e.message); }
        } }, "Send output"), " ", deny);
    } else if (a.kind === "mcp_auth") {
      const back = el("input", { type: "text", class: "authorization", placeholder: "the address the browser came back to, or a token", size: "40" });
      const link = /^https?:\/\//.test(a.url || "") ? el("a", { href: a.url, target: "_blank", rel: "noopener noreferrer" }, "open it") : `(an address that is not http or https: ${a.url})`;
      row.append(`${a.server} waits for authorization (${(a.scopes || []).join(" ")}): `, link, ", then ", back, " ",
        el("button", { type: "button", class: "respond", onclick: () => answer(a, row, { authorization: back.value.trim() || "done" }) }, "Authorized"), " ", deny);
    } else {
      row.append(`${a.kind}: ${a.tool} ${a.arguments ? JSON.stringify(a.arguments) : ""} `,
        el("button", { type: "button", class: "approve", onclick: () => answer(a, row, { approve: true }) }, a.kind === "reconcile" ? "It happened" : "Approve"), " ", deny);
    }
    box.append(row);
  }
}

async function sendTurn(ev) {
  ev.preventDefault();
  const text = $("turn-text").value.trim();
  if (!text) return;
  await startTurn({ text });
  $("turn-text").value = "";
}

async function startTurn(body) {
  try {
    await api("POST", `/v1/sessions/${state.session}/turns`, body);
    $("actions").replaceChildren();
    await showSession();
  } catch (e) {
    banner(e.status === 409 && e.data && e.data.peer ? `The agent runs on ${peerName(e.data.peer)}, not on this node: open that node's page.` : e.message);
  }
}

async function migrate(ev) {
  ev.preventDefault();
  const to = $("migrate-to").value;
  $("phases").replaceChildren(el("li", {}, `moving to ${peerName(to)}…`));
  try {
    const out = await api("POST", `/v1/capsules/${state.agent}/migrate`, { to });
    $("phases").replaceChildren(...(out.phases || []).map((p) => el("li", {}, `${p.name}: ${p.ms} ms`)),
      el("li", { "data-outcome": out.outcome }, `${out.outcome}${out.reason ? ": " + out.reason : ""}` +
        (out.outcome === "committed" ? ` at epoch ${out.epoch}, frozen for ${out.frozen_ms} ms` : "")));
    if (out.outcome === "committed") banner(`The agent moved to ${peerName(to)}: it runs there now.`);
  } catch (e) {
    $("phases").replaceChildren(el("li", {}, e.message));
  }
  await refresh();
}

start();
