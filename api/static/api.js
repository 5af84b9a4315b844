// The HTTP API: JSON requests with the bearer token, and a run's events as server-sent events
// read through fetch (EventSource cannot send an Authorization header).

const KEY = "verity.token";

export const token = {
  get: () => localStorage.getItem(KEY) ?? "",
  set: (value) => (value ? localStorage.setItem(KEY, value) : localStorage.removeItem(KEY)),
};

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function headers(extra = {}) {
  const secret = token.get();
  return secret ? { authorization: `Bearer ${secret}`, ...extra } : extra;
}

async function failure(response) {
  const body = await response.json().catch(() => null);
  const message = typeof body?.error === "string" ? body.error : `HTTP ${response.status}`;
  return new ApiError(response.status, message);
}

export async function api(path, { method = "GET", body, signal } = {}) {
  const init = { method, signal, headers: headers() };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  if (!response.ok) throw await failure(response);
  return response.json();
}

const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// Follow a run's events to its end: onEvent(runEvent) for each, then onEnd({status, last_seq}).
// A dropped connection resumes with Last-Event-ID: no event is missed or repeated.
export async function followEvents(runId, { onEvent, onEnd, signal, after = 0 }) {
  let last = after;
  for (let tries = 0; !signal?.aborted; tries += 1) {
    try {
      const extra = { accept: "text/event-stream" };
      if (last > 0) extra["last-event-id"] = String(last);
      const response = await fetch(`/runs/${encodeURIComponent(runId)}/events`,
        { headers: headers(extra), signal });
      if (!response.ok) throw await failure(response);
      for await (const frame of sseFrames(response.body)) {
        tries = 0;
        if (frame.event === "run_event") {
          last = Number(frame.id);
          onEvent(frame.data);
        } else if (frame.event === "end") {
          onEnd(frame.data);
          return;
        } else if (frame.event === "error") {
          throw new ApiError(0, frame.data.error);
        }
      }
    } catch (error) {
      if (signal?.aborted || error instanceof ApiError || tries >= 5) throw error;
      await sleep(300 * (tries + 1));
    }
  }
}

// The frames of an SSE body as {event, id, data}; comments (keep-alive pings) are skipped.
export async function* sseFrames(body) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value.replaceAll("\r\n", "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const frame = parseFrame(buffer.slice(0, cut));
        buffer = buffer.slice(cut + 2);
        if (frame) yield frame;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function parseFrame(text) {
  let event = "message";
  let id = null;
  const data = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (name === "event") event = value;
    else if (name === "id") id = value;
    else if (name === "data") data.push(value);
  }
  return data.length ? { event, id, data: JSON.parse(data.join("\n")) } : null;
}
