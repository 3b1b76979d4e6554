// Runs rml-wasm's module under Node.js on a zoo fixture and checks its output.
//
//   node run.mjs MODULE.wasm FIXTURE_DIR
//
// Reads `x` from FIXTURE_DIR/inputs.npz and `y` from FIXTURE_DIR/expected.npz (a tiny
// .npz reader: zip members, stored or deflated, holding little-endian f32 .npy
// arrays), places the buffers in the module's memory above `__heap_base`, calls
// `rml_run`, and compares within 1e-4 relative plus 1e-4 absolute. It then checks that
// bad pointers and short scratch give the documented error codes and leave the output
// untouched. Exits non-zero on any mismatch.
import { readFileSync } from "node:fs";
import { inflateRawSync } from "node:zlib";
import { join } from "node:path";

const TOLERANCE = 1e-4;
const RML = { OK: 0, BAD_ARGUMENT: 1, BAD_MEMORY: 2, SCRATCH_TOO_SMALL: 3 };

/** The members of a zip archive, by name, as Buffers. */
function unzip(bytes) {
  const members = new Map();
  let at = 0;
  while (at + 30 <= bytes.length && bytes.readUInt32LE(at) === 0x04034b50) {
    const flags = bytes.readUInt16LE(at + 6);
    const method = bytes.readUInt16LE(at + 8);
    let size = bytes.readUInt32LE(at + 18);
    const nameLen = bytes.readUInt16LE(at + 26);
    const extraLen = bytes.readUInt16LE(at + 28);
    const name = bytes.toString("utf8", at + 30, at + 30 + nameLen);
    const extra = bytes.subarray(at + 30 + nameLen, at + 30 + nameLen + extraLen);
    if (size === 0xffffffff) size = zip64Size(extra, name);
    if (flags & 0x08) throw new Error(`${name}: zip data descriptors are not supported`);
    const start = at + 30 + nameLen + extraLen;
    const data = bytes.subarray(start, start + size);
    if (method === 0) members.set(name, data);
    else if (method === 8) members.set(name, inflateRawSync(data));
    else throw new Error(`${name}: zip method ${method} is not supported`);
    at = start + size;
  }
  return members;
}

/** The compressed size from a zip64 extra field. */
function zip64Size(extra, name) {
  for (let at = 0; at + 4 <= extra.length; ) {
    const id = extra.readUInt16LE(at);
    const len = extra.readUInt16LE(at + 2);
    if (id === 0x0001 && len >= 16) return Number(extra.readBigUInt64LE(at + 12));
    at += 4 + len;
  }
  throw new Error(`${name}: zip64 size missing`);
}

/** A little-endian f32 C-order .npy array as {shape, data}. */
function parseNpy(bytes, what) {
  if (bytes.toString("latin1", 0, 6) !== "\x93NUMPY") throw new Error(`${what}: not a .npy array`);
  const major = bytes[6];
  const headerLen = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const headerStart = major === 1 ? 10 : 12;
  const header = bytes.toString("latin1", headerStart, headerStart + headerLen);
  const descr = /'descr':\s*'([^']*)'/.exec(header)?.[1];
  const fortran = /'fortran_order':\s*(True|False)/.exec(header)?.[1];
  const shapeText = /'shape':\s*\(([^)]*)\)/.exec(header)?.[1];
  if (descr !== "<f4" || fortran !== "False" || shapeText === undefined) {
    throw new Error(`${what}: need a C-order little-endian f32 array, header is ${header.trim()}`);
  }
  const shape = shapeText.split(",").map((s) => s.trim()).filter((s) => s).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const start = headerStart + headerLen;
  if (bytes.length < start + 4 * count) throw new Error(`${what}: data is truncated`);
  const data = new Float32Array(count);
  for (let i = 0; i < count; i++) data[i] = bytes.readFloatLE(start + 4 * i);
  return { shape, data };
}

/** Array `key` of an .npz file. */
function loadNpz(path, key) {
  const member = unzip(readFileSync(path)).get(`${key}.npy`);
  if (!member) throw new Error(`${path}: no array "${key}"`);
  return parseNpy(member, `${path}:${key}`);
}

function main() {
  const [modulePath, fixture] = process.argv.slice(2);
  if (!modulePath || !fixture) {
    console.error("usage: node run.mjs MODULE.wasm FIXTURE_DIR");
    process.exit(2);
  }
  const bytes = readFileSync(modulePath);
  const module = new WebAssembly.Module(bytes);
  const imports = WebAssembly.Module.imports(module);
  if (imports.length) throw new Error(`the module imports ${JSON.stringify(imports)}; it should need nothing`);
  const rml = new WebAssembly.Instance(module, {}).exports;

  const x = loadNpz(join(fixture, "inputs.npz"), "x");
  const expected = loadNpz(join(fixture, "expected.npz"), "y");
  const [rows, width] = x.shape;
  const outWidth = rml.rml_output_width();
  if (x.shape.length !== 2 || width !== rml.rml_input_width()) {
    throw new Error(`x has shape [${x.shape}], the module takes [rows, ${rml.rml_input_width()}]`);
  }
  if (expected.data.length !== rows * outWidth) {
    throw new Error(`expected y has shape [${expected.shape}], the module writes [${rows}, ${outWidth}]`);
  }

  // The caller's memory: everything from __heap_base up, grown as needed.
  const align = (v) => Math.ceil(v / 16) * 16;
  const scratchLen = rml.rml_scratch_bytes(rows) >>> 0;
  const xPtr = align(rml.__heap_base.value);
  const yPtr = align(xPtr + 4 * x.data.length);
  const scratchPtr = align(yPtr + 4 * rows * outWidth);
  const end = scratchPtr + scratchLen;
  const memory = rml.memory;
  if (end > memory.buffer.byteLength) memory.grow(Math.ceil((end - memory.buffer.byteLength) / 65536));
  new Float32Array(memory.buffer, xPtr, x.data.length).set(x.data);
  const y = () => new Float32Array(memory.buffer, yPtr, rows * outWidth);

  let failures = 0;
  const expectCode = (what, got, want) => {
    if (got !== want) {
      console.log(`FAIL ${what}: rml_run returned ${got}, expected ${want}`);
      failures++;
    }
  };

  // Bad calls first: each must fail with its code and leave y as it was (NaN).
  y().fill(NaN);
  const memEnd = memory.buffer.byteLength;
  const badCalls = [
    ["null x", [0, rows, yPtr, scratchPtr, scratchLen], RML.BAD_ARGUMENT],
    ["misaligned y", [xPtr, rows, yPtr + 2, scratchPtr, scratchLen], RML.BAD_ARGUMENT],
    ["zero rows", [xPtr, 0, yPtr, scratchPtr, scratchLen], RML.BAD_ARGUMENT],
    ["x below __heap_base", [8, rows, yPtr, scratchPtr, scratchLen], RML.BAD_MEMORY],
    ["y past the end of memory", [xPtr, rows, memEnd - 4, scratchPtr, scratchLen], RML.BAD_MEMORY],
    ["y overlapping x", [xPtr, rows, xPtr + 4, scratchPtr, scratchLen], RML.BAD_MEMORY],
    ["huge row count", [xPtr, 0x7fffffff, yPtr, scratchPtr, scratchLen], RML.BAD_MEMORY],
    ["row count whose byte size wraps", [xPtr, 2 ** 25, yPtr, scratchPtr, scratchLen], RML.BAD_MEMORY],
    ["short scratch", [xPtr, rows, yPtr, scratchPtr, scratchLen - 4], scratchLen ? RML.SCRATCH_TOO_SMALL : RML.OK],
  ];
  for (const [what, args, want] of badCalls) {
    expectCode(what, rml.rml_run(...args), want);
    if (want !== RML.OK && !y().every(Number.isNaN)) {
      console.log(`FAIL ${what}: y was written`);
      failures++;
    }
  }

  expectCode("fixture run", rml.rml_run(xPtr, rows, yPtr, scratchPtr, scratchLen), RML.OK);
  const got = y();
  let maxErr = 0;
  for (let r = 0; r < rows; r++) {
    const row = Array.from(got.subarray(r * outWidth, (r + 1) * outWidth));
    console.log(`y[${r}]: ${row.join(" ")}`);
  }
  for (let i = 0; i < got.length; i++) {
    const err = Math.abs(got[i] - expected.data[i]);
    maxErr = Math.max(maxErr, err);
    if (!(err <= TOLERANCE + TOLERANCE * Math.abs(expected.data[i]))) {
      console.log(`FAIL y[${i}] = ${got[i]}, expected ${expected.data[i]}`);
      failures++;
    }
  }

  const runs = 2000;
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < runs; i++) rml.rml_run(xPtr, rows, yPtr, scratchPtr, scratchLen);
  const perRun = Number(process.hrtime.bigint() - t0) / runs / 1000;
  console.log(
    `${modulePath}: ${bytes.length} bytes; ${got.length} values, max abs error ${maxErr.toExponential(2)}; ` +
      `${badCalls.length} bad calls checked; ${perRun.toFixed(1)} µs per run (wall, informational)`,
  );
  if (failures) {
    console.log(`run.mjs: ${failures} failure(s)`);
    process.exit(1);
  }
}

main();
