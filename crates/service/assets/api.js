// The service's HTTP API, as the page uses it. No dependencies. Every failure — the network,
// a proxy's HTML error page, a body that is not JSON, a stream cut mid-reply — becomes an
// Error whose message says what happened (the HTTP status when the body says nothing).

/** Parses `text` as JSON; `null` when it is not JSON. */
export function parseJson(text) {
  try {
    return JSON.parse(text);
  } catch (_) {
    return null;
  }
}

/** The Error for a non-2xx `response` whose body was `text`. */
function httpError(response, text) {
  const body = parseJson(text);
  const server = body && body.error && body.error.message;
  const error = new Error(server || `HTTP ${response.status}${response.statusText ? ` ${response.statusText}` : ""}`);
  error.status = response.status;
  error.field = body && body.error ? body.error.field : undefined;
  return error;
}

/** `fetch`, with a network failure turned into a readable Error. */
async function request(url, options) {
  try {
    return await fetch(url, options);
  } catch (e) {
    throw new Error(`network error: ${e.message || e}`);
  }
}

/** JSON from `url`; a non-2xx answer throws an Error carrying the server's message or the HTTP status. */
export async function json(url, options = {}) {
  const response = await request(url, {
    ...options,
    headers: { "content-type": "application/json", ...(options.headers || {}) },
  });
  const text = await response.text().catch(() => "");
  if (!response.ok) throw httpError(response, text);
  if (!text) return null;
  const body = parseJson(text);
  if (body === null) throw new Error(`HTTP ${response.status}: the answer is not JSON`);
  return body;
}

/** Like `json`, and also the answer's ETag (the session's revision). */
export async function jsonWithEtag(url) {
  const response = await request(url, { headers: { accept: "application/json" } });
  const text = await response.text().catch(() => "");
  if (!response.ok) throw httpError(response, text);
  const body = parseJson(text);
  if (body === null) throw new Error(`HTTP ${response.status}: the answer is not JSON`);
  return { body, etag: response.headers.get("etag") };
}

export function sessionPath(session) {
  return `/v1/sessions/${encodeURIComponent(session.app)}/${encodeURIComponent(session.user)}/${encodeURIComponent(session.id)}`;
}

/**
 * POSTs `body` to an SSE endpoint and calls `onEvent(name, data)` for each event as it
 * arrives (chunks do not line up with events: buffer and split on a blank line). Throws when
 * the request fails or the stream breaks; a non-2xx answer throws with its message or status.
 */
export async function postSse(url, body, onEvent) {
  const response = await request(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "text/event-stream" },
    body: JSON.stringify(body),
  });
  if (!response.ok) {
    const text = await response.text().catch(() => "");
    throw httpError(response, text);
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    let chunk;
    try {
      chunk = await reader.read();
    } catch (e) {
      throw new Error(`the reply was cut off: ${e.message || e}`);
    }
    if (chunk.done) break;
    buffer += decoder.decode(chunk.value, { stream: true }).replace(/\r\n/g, "\n");
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
