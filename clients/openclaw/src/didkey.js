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
