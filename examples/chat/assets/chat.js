// The chat page of the room named by the URL, /rooms/<room>.
//
// Messages come over a WebSocket (/rooms/<room>/ws), which also takes what
// this page sends. When the WebSocket cannot be opened, or the URL says
// ?transport=sse, they come as server-sent events (/rooms/<room>/events)
// and what this page sends is POSTed to /rooms/<room>/messages. Either way
// a message is JSON, {"from": NAME, "text": TEXT}, and everyone in the room
// gets it, whatever their transport.
//
// Text from the server is only ever put in the page with textContent, so a
// message is shown as the characters it holds and never runs as markup.
"use strict";

const room = decodeURIComponent(location.pathname.split("/")[2] || "");
const base = "/rooms/" + encodeURIComponent(room);

const log = document.getElementById("log");
const statusLine = document.getElementById("status");
const form = document.getElementById("send");
const nameInput = document.getElementById("name");
const textInput = document.getElementById("text");

// How this page sends now: a function of the message, or null when it is
// not connected.
let send = null;

function setStatus(state, text, transport) {
  statusLine.dataset.state = state; // "connecting", "open" or "closed"
  statusLine.dataset.transport = transport || "";
  statusLine.textContent = text;
}

function addLine(parts, className) {
  const stuckToBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 4;
  const item = document.createElement("li");
  if (className) item.className = className;
  item.append(...parts);
  log.append(item);
  if (stuckToBottom) log.scrollTop = log.scrollHeight;
}

function showMessage(message) {
  const from = document.createElement("span");
  from.className = "from";
  from.textContent = message.from;
  const text = document.createElement("span");
  text.className = "text";
  text.textContent = message.text;
  addLine([from, text], "message");
}

function showNotice(text) {
  addLine([document.createTextNode(text)], "notice");
}

// A message from the server: one said in the room, or the reason a message
// of ours was refused.
function receive(data) {
  let message;
  try {
    message = JSON.parse(data);
  } catch {
    return;
  }
  if (typeof message.error === "string") {
    showNotice("Not sent: " + message.error);
  } else if (typeof message.from === "string" && typeof message.text === "string") {
    showMessage(message);
  }
}

// --- WebSocket -------------------------------------------------------------

let retryDelay = 1000;

function connectWebSocket() {
  const scheme = location.protocol === "https:" ? "wss://" : "ws://";
  const socket = new WebSocket(scheme + location.host + base + "/ws");
  let opened = false;
  setStatus("connecting", "connecting…");

  socket.onopen = () => {
    opened = true;
    retryDelay = 1000;
    send = (message) => socket.send(JSON.stringify(message));
    setStatus("open", "connected (WebSocket)", "websocket");
  };
  socket.onmessage = (event) => receive(event.data);
  socket.onclose = (event) => {
    send = null;
    if (!opened) {
      // Never opened: something on the way does not pass WebSockets.
      showNotice("WebSocket unavailable; using server-sent events.");
      connectEventSource();
      return;
    }
    if (event.code === 1009) showNotice("Disconnected: that message was too long.");
    setStatus("closed", "disconnected; reconnecting…");
    setTimeout(connectWebSocket, retryDelay);
    retryDelay = Math.min(retryDelay * 2, 30000);
  };
}

// --- Server-sent events and POST -------------------------------------------

function connectEventSource() {
  const events = new EventSource(base + "/events");
  setStatus("connecting", "connecting…");
  events.onopen = () => {
    send = postToRoom;
    setStatus("open", "connected (server-sent events)", "sse");
  };
  events.onmessage = (event) => receive(event.data);
  events.onerror = () => {
    // The browser reconnects by itself (and resumes where it was) unless
    // the server said to stop.
    send = null;
    const over = events.readyState === EventSource.CLOSED;
    setStatus("closed", over ? "disconnected" : "disconnected; reconnecting…");
  };
}

async function postToRoom(message) {
  let response;
  try {
    response = await fetch(base + "/messages", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(message),
    });
  } catch {
    showNotice("Not sent: the server cannot be reached.");
    return;
  }
  if (!response.ok) {
    const answer = await response.json().catch(() => ({}));
    showNotice("Not sent: " + (answer.error || "error " + response.status));
  }
}

// --- The form ----------------------------------------------------------------

nameInput.value = localStorage.getItem("chat-name") || "";
nameInput.addEventListener("change", () => localStorage.setItem("chat-name", nameInput.value.trim()));

form.addEventListener("submit", (event) => {
  event.preventDefault();
  if (!send) {
    showNotice("Not sent: not connected.");
    return;
  }
  send({ from: nameInput.value.trim(), text: textInput.value });
  textInput.value = "";
  textInput.focus();
});

document.getElementById("room").textContent = "#" + room;
document.title = "#" + room + " · Chat";

if (new URLSearchParams(location.search).get("transport") === "sse" || !("WebSocket" in window)) {
  connectEventSource();
} else {
  connectWebSocket();
}
