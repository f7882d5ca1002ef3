// devicecloud dashboard: progressive enhancement only; every page works without it.
"use strict";

// Command forms run without leaving the page: the answer replaces #command-result.
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.matches("form[data-async]")) return;
  event.preventDefault();
  const result = document.getElementById("command-result");
  const button = form.querySelector("button");
  if (button) button.disabled = true;
  result.textContent = "Sent, waiting for the gateway…";
  try {
    const response = await fetch(form.action, {
      method: "POST",
      body: new URLSearchParams(new FormData(form)),
      headers: { "X-Fragment": "1" },
      credentials: "same-origin",
    });
    // A session that ended on the way sends to the sign-in form: go there, not into the panel.
    if (response.redirected) {
      window.location.assign(response.url);
      return;
    }
    const type = response.headers.get("Content-Type") || "";
    if (type.startsWith("text/html")) {
      result.innerHTML = await response.text();
    } else {
      result.textContent = "The request failed (HTTP " + response.status + ").";
    }
  } catch (e) {
    result.textContent = "The request failed: " + e;
  } finally {
    if (button) button.disabled = false;
  }
});

// Fetches an element's data-refresh URL into it; a session that ended reloads the page (which
// then asks to sign in).
async function refresh(element) {
  try {
    const response = await fetch(element.dataset.refresh, { credentials: "same-origin" });
    if (response.redirected) {
      window.location.reload();
    } else if (response.ok) {
      element.innerHTML = await response.text();
    }
  } catch (e) {
    // The next try goes again; a failed refresh leaves the last values on screen.
  }
}

// The live stream of the page (an element with data-live: Server-Sent Events), if it has one
// and the browser can open it: new values, events and command outcomes as they happen. The
// browser reconnects by itself, resuming after the last event it got.
const liveRoot = document.querySelector("[data-live]");
const live = liveRoot && "EventSource" in window ? new EventSource(liveRoot.dataset.live) : null;

// While the stream is open, polling pauses; when it cannot open, polling goes on.
const streaming = () => live !== null && live.readyState === EventSource.OPEN;

// Elements with data-refresh are reloaded from their URL every data-every seconds.
for (const element of document.querySelectorAll("[data-refresh]")) {
  const every = Number(element.dataset.every || "15") * 1000;
  setInterval(() => {
    if (!document.hidden && !streaming()) refresh(element);
  }, every);
}

if (live !== null) {
  // A page left for another closes its stream, so that pages kept for "back" hold no
  // connection (a browser opens only a few to one server); one shown again from that cache is
  // reloaded, as its values are old.
  window.addEventListener("pagehide", () => live.close());
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) window.location.reload();
  });

  const state = () => {
    liveRoot.dataset.liveState = ["connecting", "open", "closed"][live.readyState];
  };
  live.addEventListener("open", state);
  live.addEventListener("error", state);

  // A value of a datatype the table does not show yet: the table is fetched again, once at a
  // time.
  let fetching = null;
  const refetch = (element) => {
    if (element && fetching === null) {
      fetching = refresh(element).finally(() => { fetching = null; });
    }
  };

  live.addEventListener("latest", (event) => {
    const value = JSON.parse(event.data);
    const latest = document.getElementById("latest");
    const row = latest && latest.querySelector(`tr[data-datatype="${Number(value.datatype)}"]`);
    if (!row) {
      refetch(latest);
      return;
    }
    row.querySelector(".value").textContent = value.value;
    const measured = row.querySelector(".measured");
    measured.textContent = value.measured;
    measured.title = value.measured_utc;
    row.classList.remove("fresh");
    void row.offsetWidth; // restarts the highlight
    row.classList.add("fresh");
  });

  // New rows go on top; the table keeps as many rows as it was drawn with (at least 10).
  const prepend = (body, html, keep) => {
    const holder = document.createElement("tbody");
    holder.innerHTML = html;
    const row = holder.firstElementChild;
    if (!body || !row) return;
    body.querySelector("tr.empty")?.remove();
    row.classList.add("fresh");
    body.prepend(row);
    while (body.children.length > keep) body.lastElementChild.remove();
  };
  const eventsBody = document.querySelector("table[data-live-events] tbody");
  const eventsKept = Math.max(10, eventsBody ? eventsBody.children.length : 0);
  live.addEventListener("event", (event) => {
    prepend(eventsBody, JSON.parse(event.data).html, eventsKept);
  });

  const outcomes = document.querySelector("[data-live-commands]");
  live.addEventListener("command", (event) => {
    if (!outcomes) return;
    outcomes.hidden = false;
    const list = outcomes.querySelector("ul");
    list.insertAdjacentHTML("afterbegin", JSON.parse(event.data).html);
    while (list.children.length > 20) list.lastElementChild.remove();
  });

  // Records were lost on the way: what the page shows is read again.
  live.addEventListener("overflow", () => {
    for (const element of document.querySelectorAll("[data-refresh]")) refresh(element);
  });
}

// An alarm rule's condition is checked as it is typed: the answer (compiles, or where and why
// not) goes beside the field. The form is still checked when saved.
{
  let pending;
  document.addEventListener("input", (event) => {
    const field = event.target;
    if (!(field instanceof HTMLTextAreaElement) || !field.matches("textarea[data-check]")) return;
    clearTimeout(pending);
    pending = setTimeout(async () => {
      const shown = field.parentElement.querySelector(".check");
      if (!shown) return;
      const url = "/alarm-rules/check?condition=" + encodeURIComponent(field.value);
      try {
        const response = await fetch(url, { credentials: "same-origin" });
        shown.textContent = await response.text();
        shown.classList.toggle("error", response.status === 422);
      } catch (_) {
        shown.textContent = "";
      }
    }, 300);
  });
}
