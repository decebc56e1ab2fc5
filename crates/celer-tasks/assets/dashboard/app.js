// The task dashboard: counts by state, a live list over the store-wide
// event stream, a submit form and cancel buttons. No framework, no inline
// code (the page runs under a strict Content-Security-Policy).
"use strict";

(() => {
  const API = location.pathname.replace(/\/ui\/?$/, "");
  const STATES = ["queued", "running", "succeeded", "failed", "cancelled", "dead"];
  const MAX_ROWS = 100;
  const $ = (sel) => document.querySelector(sel);
  const rows = new Map();
  let token = sessionStorage.getItem("celer-tasks-token") || "";
  let statsTimer = null;
  let feed = null;

  function headers(extra) {
    const h = Object.assign({ Accept: "application/json" }, extra || {});
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  async function api(method, path, body) {
    const init = { method, headers: headers(body ? { "Content-Type": "application/json" } : {}) };
    if (body !== undefined) init.body = JSON.stringify(body);
    const res = await fetch(API + path, init);
    if (res.status === 401 || res.status === 403) askForKey(res.status);
    let data = null;
    try { data = await res.json(); } catch (_) { data = null; }
    return { status: res.status, data, res };
  }

  function askForKey(status) {
    $("#auth").hidden = false;
    setLive(false, status === 403 ? "key revoked" : "API key needed");
  }

  function setLive(on, text) {
    const live = $("#live");
    live.textContent = text;
    live.classList.toggle("off", !on);
  }

  function time(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    return d.toLocaleTimeString([], { hour12: false });
  }

  function render(task) {
    let tr = rows.get(task.id);
    if (!tr) {
      tr = document.createElement("tr");
      tr.dataset.id = String(task.id);
      for (const cls of ["id", "kind", "state", "progress", "attempts", "created", "actions"]) {
        const td = document.createElement("td");
        td.className = cls;
        tr.appendChild(td);
      }
      const body = $("#tasks tbody");
      // Newest first: ids grow with submission.
      let before = null;
      for (const other of body.children) {
        if (Number(other.dataset.id) < task.id) { before = other; break; }
      }
      body.insertBefore(tr, before);
      rows.set(task.id, tr);
      while (body.children.length > MAX_ROWS) {
        const last = body.lastElementChild;
        rows.delete(Number(last.dataset.id));
        last.remove();
      }
    } else if (older(version(task), JSON.parse(tr.dataset.version))) {
      return; // an older snapshot arriving late
    }
    tr.dataset.version = JSON.stringify(version(task));
    tr.dataset.state = task.state;
    const cell = (cls) => tr.querySelector("td." + cls);
    cell("id").textContent = "#" + task.id;
    cell("kind").textContent = task.kind;
    const state = cell("state");
    state.textContent = task.state + (task.cancel_requested && !isFinal(task.state) ? " (stopping)" : "");
    state.className = "state " + task.state;
    if (task.error) state.title = task.error; else state.removeAttribute("title");
    const progress = cell("progress");
    progress.textContent = "";
    if (task.progress !== null && task.progress !== undefined) {
      const bar = document.createElement("progress");
      bar.max = 1;
      bar.value = task.progress;
      progress.appendChild(bar);
    }
    cell("attempts").textContent = task.attempts + " / " + task.max_attempts;
    cell("created").textContent = time(task.created_at);
    const actions = cell("actions");
    actions.textContent = "";
    if (!isFinal(task.state) && !task.cancel_requested) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "cancel";
      button.textContent = "Cancel";
      button.addEventListener("click", () => cancel(task.id, button));
      actions.appendChild(button);
    } else if (task.has_result) {
      const link = document.createElement("a");
      link.href = API + "/" + task.id + "/result";
      link.textContent = "result";
      link.className = "result";
      actions.appendChild(link);
    }
    $("#empty").hidden = rows.size > 0;
  }

  // Snapshots arrive out of order (a fetch's answer after the events that
  // followed it; events published from different threads), and two changes
  // may share a millisecond: order them by attempt (a claim counts one),
  // then time, then state (queued, running, final: a final state is never
  // left).
  function version(task) {
    const rank = task.state === "queued" ? 0 : task.state === "running" ? 1 : 2;
    return [task.attempts, Date.parse(task.updated_at), rank];
  }

  function older(a, b) {
    for (let i = 0; i < a.length; i++) {
      if (a[i] !== b[i]) return a[i] < b[i];
    }
    return false;
  }

  function isFinal(state) {
    return state !== "queued" && state !== "running";
  }

  async function cancel(id, button) {
    button.disabled = true;
    const { status, data } = await api("POST", "/" + id + "/cancel");
    if (status === 202 && data) render(data);
    else button.disabled = false;
    scheduleStats();
  }

  async function loadStats() {
    const { status, data } = await api("GET", "/stats");
    if (status !== 200 || !data) return;
    for (const s of STATES) $("#count-" + s).textContent = String(data.by_state[s] || 0);
    const list = $("#kinds");
    for (const kind of Object.keys(data.by_kind)) {
      if (![...list.options].some((o) => o.value === kind)) {
        const option = document.createElement("option");
        option.value = kind;
        list.appendChild(option);
      }
    }
  }

  function scheduleStats() {
    if (statsTimer) return;
    statsTimer = setTimeout(() => { statsTimer = null; loadStats(); }, 250);
  }

  async function loadList() {
    const { status, data } = await api("GET", "?limit=" + MAX_ROWS);
    if (status !== 200 || !data) return false;
    for (const task of data.tasks.slice().reverse()) render(task);
    $("#empty").hidden = rows.size > 0;
    return true;
  }

  // Server-sent events over fetch, so that the key goes in a header.
  async function listen() {
    if (feed) feed.abort();
    const controller = new AbortController();
    feed = controller;
    let delay = 500;
    while (feed === controller) {
      try {
        const res = await fetch(API + "/events", {
          headers: headers({ Accept: "text/event-stream" }),
          signal: controller.signal,
        });
        if (res.status === 401 || res.status === 403) { askForKey(res.status); return; }
        if (!res.ok || !res.body) throw new Error("events: " + res.status);
        setLive(true, "live");
        delay = 500;
        // Changes made while we were away: reload, then follow.
        await loadList();
        scheduleStats();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value.replace(/\r\n?/g, "\n");
          let end;
          while ((end = buffer.indexOf("\n\n")) >= 0) {
            dispatch(buffer.slice(0, end));
            buffer = buffer.slice(end + 2);
          }
        }
      } catch (err) {
        if (controller.signal.aborted) return;
      }
      setLive(false, "reconnecting…");
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  }

  function dispatch(block) {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (event === "task" && data.length) {
      render(JSON.parse(data.join("\n")));
      scheduleStats();
    } else if (event === "resync") {
      loadList();
      scheduleStats();
    }
  }

  async function submit(event) {
    event.preventDefault();
    const out = $("#submit-status");
    let input;
    try {
      input = JSON.parse($("#input").value || "null");
    } catch (err) {
      out.textContent = "Input is not JSON: " + err.message;
      out.className = "status error";
      return;
    }
    const { status, data, res } = await api("POST", "", { kind: $("#kind").value.trim(), input });
    if ((status === 201 || status === 200) && data) {
      out.textContent = "Submitted task #" + data.id + ".";
      out.className = "status ok";
      render(data);
      scheduleStats();
    } else {
      const wait = res.headers.get("Retry-After");
      out.textContent = (data && data.error ? data.error : "HTTP " + status) +
        (wait ? " (retry after " + wait + " s)" : "");
      out.className = "status error";
    }
  }

  async function start() {
    $("#submit-form").addEventListener("submit", submit);
    $("#auth-form").addEventListener("submit", (event) => {
      event.preventDefault();
      token = $("#token").value.trim();
      sessionStorage.setItem("celer-tasks-token", token);
      $("#auth").hidden = true;
      loadStats();
      listen();
    });
    await loadStats();
    listen();
  }

  start();
})();
