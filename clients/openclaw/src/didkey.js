// did:key for Ed25519 keys, and the agent's signing key.
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign } from "node:crypto";

const ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";

/**
 * base58btc (Bitcoin alphabet) of bytes.
 * @param {Uint8Array} bytes
 */
export function base58btc(bytes) {
  let n = 0n;
  for (const b of bytes) n = (n << 8n) | BigInt(b);
  let out = "";
  while (n > 0n) {
    out = ALPHABET[Number(n % 58n)] + out;
    n /= 58n;
  }
  for (const b of bytes) {
    if (b !== 0) break;
    out = "1" + out;
  }
  return out;
}

/**
 * did:key of a raw 32-byte Ed25519 public key: "did:key:z" +
 * base58btc(0xed 0x01 || key).
 * @param {Uint8Array} pub
 */
export function didKeyFromEd25519(pub) {
  if (pub.length !== 32) throw new TypeError("did:key: an Ed25519 public key has 32 bytes");
  return "did:key:z" + base58btc(Uint8Array.from([0xed, 0x01, ...pub]));
}

/**
 * An Ed25519 signer: a PKCS#8 PEM private key, or a fresh key kept only in
 * memory when pem is undefined.
 * @param {string} [pem]
 */
export function agentSigner(pem) {
  const key = pem === undefined ? generateKeyPairSync("ed25519").privateKey : createPrivateKey(pem);
  if (key.asymmetricKeyType !== "ed25519") throw new TypeError("the agent key must be an Ed25519 key");
  const jwk = createPublicKey(key).export({ format: "jwk" });
  const pub = Buffer.from(/** @type {string} */ (jwk.x), "base64url");
  return {
    did: didKeyFromEd25519(pub),
    /** @param {string | Uint8Array} data */
    sign: (data) => new Uint8Array(sign(null, typeof data === "string" ? Buffer.from(data, "utf8") : data, key)),
  };
}

/**
 * The raw 32-byte Ed25519 public key of a did:key, strictly: only the
 * canonical form didKeyFromEd25519 produces is accepted (so one DID names
 * one key). Throws on anything else.
 * @param {string} did
 */
export function ed25519FromDidKey(did) {
  if (typeof did !== "string" || !did.startsWith("did:key:z6Mk") || did.length > 64) {
    throw new TypeError("not an Ed25519 did:key");
  }
  let n = 0n;
  for (const ch of did.slice("did:key:z".length)) {
    const i = ALPHABET.indexOf(ch);
    if (i < 0) throw new TypeError("not an Ed25519 did:key: not base58btc");
    n = n * 58n + BigInt(i);
  }
  const hex = n.toString(16).padStart(68, "0");
  if (hex.length !== 68) throw new TypeError("not an Ed25519 did:key: wrong length");
  const b = Buffer.from(hex, "hex");
  if (b[0] !== 0xed || b[1] !== 0x01) throw new TypeError("not an Ed25519 did:key: wrong multicodec");
  const pub = new Uint8Array(b.subarray(2));
  if (didKeyFromEd25519(pub) !== did) throw new TypeError("not a canonical Ed25519 did:key");
  return pub;
}
