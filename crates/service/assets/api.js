// The service's HTTP API, as the page uses it. No dependencies.

/** JSON from `url`; a non-2xx answer throws an Error carrying the server's error body. */
export async function json(url, options = {}) {
  const response = await fetch(url, {
    ...options,
    headers: { "content-type": "application/json", ...(options.headers || {}) },
  });
  const text = await response.text();
  const body = text ? JSON.parse(text) : null;
  if (!response.ok) {
    const error = new Error((body && body.error && body.error.message) || response.statusText);
    error.status = response.status;
    error.field = body && body.error ? body.error.field : undefined;
    throw error;
  }
  return body;
}

export function sessionPath(session) {
  return `/v1/sessions/${encodeURIComponent(session.app)}/${encodeURIComponent(session.user)}/${encodeURIComponent(session.id)}`;
}

/**
 * POSTs `body` to an SSE endpoint and calls `onEvent(name, data)` for each event as it
 * arrives (chunks do not line up with events: buffer and split on a blank line).
 */
export async function postSse(url, body, onEvent) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    const text = await response.text();
    let message = response.statusText;
    try { message = JSON.parse(text).error.message; } catch (_) { /* not JSON */ }
    onEvent("error", JSON.stringify({ message }));
    return;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) onEvent(name, data.join("\n"));
    }
  }
}
