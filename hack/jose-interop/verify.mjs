// Verifies a clawea evidence document (compact JWS) with the npm jose
// package and prints its payload to stdout; exits non-zero on any failure.
//
// usage: node verify.mjs JWK_JSON < evidence.jws
//   JWK_JSON is the attester's public key as a JWK: {"kty":"OKP","crv":"Ed25519","x":...}
import { compactVerify, importJWK } from "jose";

const fail = (msg) => {
  process.stderr.write(`jose-interop: ${msg}\n`);
  process.exit(1);
};

const main = async () => {
  if (process.argv.length !== 3) fail("usage: node verify.mjs JWK_JSON < evidence.jws");
  let jwk;
  try {
    jwk = JSON.parse(process.argv[2]);
  } catch {
    fail("the JWK is not JSON");
  }
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || "d" in jwk) fail("want a public Ed25519 JWK");
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const jws = Buffer.concat(chunks).toString("utf8").trim();
  const key = await importJWK(jwk, "EdDSA");
  const { payload, protectedHeader } = await compactVerify(jws, key, { algorithms: ["EdDSA"] });
  if (protectedHeader.typ !== "clawea-evidence+jws") fail(`unexpected typ ${protectedHeader.typ}`);
  const doc = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(payload));
  if (doc.evidence_version !== "clawea.dev/evidence/v1") fail("unexpected evidence_version");
  process.stdout.write(JSON.stringify(doc));
};

main().catch((e) => fail(e && e.code ? e.code : String(e)));
