// Scans files for run capabilities (attester-api section 2, openclaw-plugin
// section 2.1: the plugin keeps them in memory only). Node >= 24 (node:sqlite).
//
//   node capscan.mjs --probe CAP --marker TEXT DIR...
//
// Every regular file below each DIR is read as bytes; a SQLite database is
// also read row by row through SQLite, because a value that spans two pages
// is not contiguous in the file (OpenClaw keeps its sessions in SQLite).
// A capability other than --probe (the owner turn's forged one) is a leak:
// the files are listed with the capability's first six characters only, and
// the exit code is 1. --marker (text of a turn) must be found in a row of
// some database, which shows the scan reads the transcripts; if not, the
// exit code is 2. A file or database that cannot be read is an error too
// (exit 2): a scan that skips what it cannot read proves nothing.
import { readFileSync, readdirSync, lstatSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { DatabaseSync } from "node:sqlite";

const { values: opts, positionals: dirs } = parseArgs({ options: { probe: { type: "string" }, marker: { type: "string" } }, allowPositionals: true });
const probe = opts.probe ?? "";
const marker = opts.marker ?? "";
if (!/^clawea-cap-v1\.[A-Za-z0-9_-]{43}$/.test(probe) || marker.length < 8 || dirs.length === 0) {
  console.error("usage: node capscan.mjs --probe CAP --marker TEXT DIR...");
  process.exit(2);
}
const CAP = /clawea-cap-v1\.[A-Za-z0-9_-]{43}/g; // a longer run still holds one
const SQLITE = Buffer.from("SQLite format 3\0", "latin1");
const leaks = new Map(); // file -> Set of fingerprints
let markerInDB = false;
let files = 0;
let dbs = 0;
const errors = [];

/** @param {string} where @param {string} text @param {boolean} inDB */
function scanText(where, text, inDB) {
  if (inDB && text.includes(marker)) markerInDB = true;
  for (const m of text.matchAll(CAP)) {
    if (m[0] === probe) continue;
    if (!leaks.has(where)) leaks.set(where, new Set());
    leaks.get(where).add(m[0].slice(0, 20) + "...");
  }
}

/** @param {string} file */
function scanDB(file) {
  let db;
  try {
    db = new DatabaseSync(file, { readOnly: true });
    const tables = db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'table'").all();
    for (const t of tables) {
      if (/^CREATE VIRTUAL/i.test(String(t.sql))) continue; // its shadow tables hold the data
      const name = String(t.name).replaceAll('"', '""');
      for (const row of db.prepare(`SELECT * FROM "${name}"`).iterate()) {
        for (const v of Object.values(row)) {
          if (typeof v === "string") scanText(`${file} (table ${t.name})`, v, true);
          else if (v instanceof Uint8Array) scanText(`${file} (table ${t.name})`, Buffer.from(v).toString("latin1"), true);
        }
      }
    }
    dbs++;
  } catch (e) {
    errors.push(`${file}: ${/** @type {Error} */ (e).message}`);
  } finally {
    db?.close();
  }
}

/** @param {string} dir */
function walk(dir) {
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    const st = lstatSync(p);
    if (st.isDirectory()) walk(p);
    else if (st.isFile()) {
      let b;
      try {
        b = readFileSync(p);
      } catch (e) {
        errors.push(`${p}: ${/** @type {Error} */ (e).message}`);
        continue;
      }
      files++;
      scanText(p, b.toString("latin1"), false);
      if (b.length >= 512 && b.subarray(0, 16).equals(SQLITE)) scanDB(p);
    }
  }
}

for (const d of dirs) walk(d);
console.error(`capscan: ${files} files, ${dbs} SQLite databases read`);
if (errors.length) {
  console.error(`capscan: could not read:\n  ${errors.join("\n  ")}`);
  process.exit(2);
}
if (leaks.size) {
  for (const [f, caps] of leaks) console.error(`capscan: LEAK in ${f}: ${[...caps].join(", ")}`);
  process.exit(1);
}
if (!markerInDB) {
  console.error("capscan: the marker was not found in any SQLite database: the scan does not reach the transcripts");
  process.exit(2);
}
console.error("capscan: no run capability on disk; the marker was found in a transcript");
