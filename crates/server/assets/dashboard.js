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

// Elements with data-refresh are reloaded from their URL every data-every seconds.
for (const element of document.querySelectorAll("[data-refresh]")) {
  const every = Number(element.dataset.every || "15") * 1000;
  setInterval(async () => {
    if (document.hidden) return;
    try {
      const response = await fetch(element.dataset.refresh, { credentials: "same-origin" });
      if (response.redirected) {
        window.location.reload();
      } else if (response.ok) {
        element.innerHTML = await response.text();
      }
    } catch (e) {
      // The next tick tries again; a failed refresh leaves the last values on screen.
    }
  }, every);
}
