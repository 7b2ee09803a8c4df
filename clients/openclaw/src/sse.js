// A strict, bounded reader of server-sent events (the WHATWG "event stream"
// format) for the model gateway's relayed provider streams. It is fed the
// bytes as they arrive and hands out each complete event; a line or an event
// over its bound, invalid UTF-8, or a stream that ends inside an event is an
// error, never a guess.

/** Bounds of one stream. */
export const SSE_LIMITS = Object.freeze({ line: 1 << 20, event: 4 << 20 });

/** A malformed or oversized event stream. */
export class SSEError extends Error {
  /** @param {string} msg */
  constructor(msg) {
    super(`event stream: ${msg}`);
    this.name = "SSEError";
  }
}

/**
 * @typedef {{event: string, data: string}} SSEEvent
 */

/** An incremental event-stream parser. */
export class SSEParser {
  /** @param {{line?: number, event?: number}} [limits] */
  constructor(limits = {}) {
    this.maxLine = limits.line ?? SSE_LIMITS.line;
    this.maxEvent = limits.event ?? SSE_LIMITS.event;
    this.decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
    this.buf = "";
    this.event = "";
    /** @type {string[]} */
    this.data = [];
    this.size = 0;
    this.sawCR = false;
  }

  /**
   * Feeds bytes; returns the events they complete, in order.
   * @param {Uint8Array} chunk
   * @returns {SSEEvent[]}
   */
  push(chunk) {
    let text;
    try {
      text = this.decoder.decode(chunk, { stream: true });
    } catch {
      throw new SSEError("invalid UTF-8");
    }
    return this.#lines(text);
  }

  /**
   * The stream ended: anything but a clean end after a complete event is an
   * error (a stream cut mid-event).
   * @returns {SSEEvent[]}
   */
  end() {
    let text;
    try {
      text = this.decoder.decode();
    } catch {
      throw new SSEError("invalid UTF-8 at the end");
    }
    const out = this.#lines(text);
    if (this.buf !== "" || this.data.length > 0 || this.event !== "") throw new SSEError("the stream ended inside an event");
    return out;
  }

  /** @param {string} text */
  #lines(text) {
    /** @type {SSEEvent[]} */
    const out = [];
    let s = this.buf + text;
    let i = 0;
    // A CR that ended the previous chunk may be followed by this chunk's LF.
    if (this.sawCR && s.startsWith("\n")) i = 1;
    this.sawCR = false;
    for (;;) {
      let j = i;
      while (j < s.length && s[j] !== "\n" && s[j] !== "\r") j++;
      if (j === s.length) break;
      const line = s.slice(i, j);
      if (line.length > this.maxLine) throw new SSEError("a line is over its bound");
      if (s[j] === "\r") {
        if (j + 1 === s.length) this.sawCR = true;
        else if (s[j + 1] === "\n") j++;
      }
      i = j + 1;
      const ev = this.#line(line);
      if (ev) out.push(ev);
    }
    this.buf = s.slice(i);
    if (this.buf.length > this.maxLine) throw new SSEError("a line is over its bound");
    return out;
  }

  /** @param {string} line */
  #line(line) {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return null;
      }
      const ev = { event: this.event || "message", data: this.data.join("\n") };
      this.event = "";
      this.data = [];
      this.size = 0;
      return ev;
    }
    if (line.startsWith(":")) return null;
    const c = line.indexOf(":");
    const field = c < 0 ? line : line.slice(0, c);
    let value = c < 0 ? "" : line.slice(c + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    this.size += value.length;
    if (this.size > this.maxEvent) throw new SSEError("an event is over its bound");
    if (field === "data") this.data.push(value);
    else if (field === "event") this.event = value;
    // id and retry carry nothing a model transport uses; other fields are
    // ignored, as the format requires.
    return null;
  }
}
