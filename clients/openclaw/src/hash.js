// Hashing and canonical JSON shared by the plugin's wire code.
import { createHash } from "node:crypto";

/**
 * base64url without padding.
 * @param {Uint8Array} bytes
 */
export function b64u(bytes) {
  return Buffer.from(bytes).toString("base64url");
}

/**
 * b64u(SHA-256(data)); strings are hashed as UTF-8.
 * @param {string | Uint8Array} data
 */
export function sha256B64u(data) {
  return createHash("sha256").update(data).digest("base64url");
}

/** A b64u SHA-256 digest: 43 characters of the URL-safe alphabet. */
export const HASH_B64U = /^[A-Za-z0-9_-]{43}$/;

/**
 * RFC 8785 (JCS) serialization of a JSON value: object keys sorted by UTF-16
 * code units (JavaScript's default sort), numbers and strings as ECMAScript
 * serializes them. Refuses values JSON cannot carry (undefined, functions,
 * non-finite numbers, bigints), so a hash never covers a lossy rendering.
 * @param {unknown} v
 * @returns {string}
 */
export function jcs(v) {
  if (v === null || typeof v === "boolean" || typeof v === "string") return JSON.stringify(v);
  if (typeof v === "number") {
    if (!Number.isFinite(v)) throw new TypeError("jcs: non-finite number");
    return JSON.stringify(v);
  }
  if (Array.isArray(v)) return "[" + v.map(jcs).join(",") + "]";
  const proto = typeof v === "object" ? Object.getPrototypeOf(v) : undefined;
  if (proto === Object.prototype || proto === null) {
    const keys = Object.keys(/** @type {object} */ (v)).sort();
    return "{" + keys.map((k) => JSON.stringify(k) + ":" + jcs(/** @type {any} */ (v)[k])).join(",") + "}";
  }
  throw new TypeError(`jcs: cannot serialize a ${typeof v}`);
}
