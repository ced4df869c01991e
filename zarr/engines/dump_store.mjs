#!/usr/bin/env node
// Opens a Zarr v3 store with zarrita.js, an implementation independent of
// the Go exporter, and dumps every array, so a test can compare each value
// with what the Go shard reader returns.
//
//   node dump_store.mjs STORE OUTDIR
//
// Arrays are found by walking STORE for zarr.json documents (zarrita has no
// listing for a file system store); each is opened and read with zarrita,
// sample slab by sample slab. OUTDIR/<array>.bin receives the values zarrita
// returned, in C order, each re-encoded little-endian in the array's data
// type from the JavaScript value (not copied from the store's bytes).
//
// zarrita skips the crc32c of a shard index when reading, so this script
// checks every shard index itself with its own CRC32C (RFC 3720), and
// checks every (offset, nbytes) pair.
//
// Prints one JSON object on stdout:
//   {"root": {"attributes": ...},
//    "arrays": {NAME: {"data_type", "shape", "chunks", "dimension_names",
//                      "fill_value", "attributes", "values", "file"}},
//    "shards": {NAME: {"files", "chunks", "empty", "crc_ok"}}}

import { Float16Array, setFloat16 } from "@petamoriken/float16";
import * as fs from "node:fs";
import * as path from "node:path";
import FileSystemStore from "@zarrita/storage/fs";
import * as zarr from "zarrita";

// Node 20 has no Float16Array; zarrita looks it up on globalThis when it
// decodes a float16 chunk.
if (globalThis.Float16Array === undefined) {
	globalThis.Float16Array = Float16Array;
}

const [storeDir, outDir] = process.argv.slice(2);
if (!storeDir || !outDir) {
	console.error("usage: node dump_store.mjs STORE OUTDIR");
	process.exit(2);
}

// CRC32C, reflected polynomial 0x82F63B78 (Castagnoli, RFC 3720).
const crcTable = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
	let c = n;
	for (let k = 0; k < 8; k++) {
		c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
	}
	crcTable[n] = c >>> 0;
}
function crc32c(bytes) {
	let c = 0xffffffff;
	for (const b of bytes) {
		c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8);
	}
	return (c ^ 0xffffffff) >>> 0;
}
// The check value of the CRC-32C catalogue entry.
if (crc32c(new TextEncoder().encode("123456789")) !== 0xe3069283) {
	throw new Error("crc32c self-check failed");
}

// Every directory holding a zarr.json, relative to the store ("" = root).
function findNodes(dir, rel, out) {
	if (fs.existsSync(path.join(dir, "zarr.json"))) {
		out.push(rel);
	}
	for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
		// "c" holds chunks, never nodes, under the default key encoding.
		if (e.isDirectory() && !(e.name === "c" && rel !== "")) {
			findNodes(path.join(dir, e.name), rel === "" ? e.name : `${rel}/${e.name}`, out);
		}
	}
	return out;
}

function listFiles(dir) {
	const out = [];
	for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
		const p = path.join(dir, e.name);
		if (e.isDirectory()) {
			out.push(...listFiles(p));
		} else {
			out.push(p);
		}
	}
	return out;
}

// Checks every shard file of an array: the index at its end, its crc32c,
// and that chunks lie inside the data before it.
function checkShards(node, meta) {
	const sharding = meta.codecs.find((c) => c.name === "sharding_indexed");
	if (!sharding) {
		throw new Error(`${node}: not sharded`);
	}
	const outer = meta.chunk_grid.configuration.chunk_shape;
	const inner = sharding.configuration.chunk_shape;
	const perShard = outer.reduce((a, d, i) => a * (d / inner[i]), 1);
	const indexBytes = perShard * 16;
	const report = { files: 0, chunks: 0, empty: 0, crc_ok: 0 };
	const chunkDir = path.join(storeDir, node, "c");
	if (!fs.existsSync(chunkDir)) {
		return report;
	}
	for (const file of listFiles(chunkDir)) {
		const b = fs.readFileSync(file);
		report.files++;
		if (b.length < indexBytes + 4) {
			throw new Error(`${file}: ${b.length} bytes, shorter than its index`);
		}
		const dataEnd = b.length - indexBytes - 4;
		const index = b.subarray(dataEnd, dataEnd + indexBytes);
		if (crc32c(index) === b.readUInt32LE(b.length - 4)) {
			report.crc_ok++;
		}
		for (let k = 0; k < perShard; k++) {
			const offset = b.readBigUInt64LE(dataEnd + 16 * k);
			const nbytes = b.readBigUInt64LE(dataEnd + 16 * k + 8);
			if (offset === 0xffffffffffffffffn && nbytes === 0xffffffffffffffffn) {
				report.empty++;
			} else if (offset + nbytes > BigInt(dataEnd)) {
				throw new Error(`${file}: chunk ${k} at ${offset}+${nbytes} runs into the index at ${dataEnd}`);
			} else {
				report.chunks++;
			}
		}
	}
	return report;
}

// Little-endian encoders of one value per data type.
const encoders = {
	uint8: [1, (v, o, x) => v.setUint8(o, x)],
	float16: [2, (v, o, x) => setFloat16(v, o, x, true)],
	float32: [4, (v, o, x) => v.setFloat32(o, x, true)],
	float64: [8, (v, o, x) => v.setFloat64(o, x, true)],
	int32: [4, (v, o, x) => v.setInt32(o, x, true)],
	uint32: [4, (v, o, x) => v.setUint32(o, x, true)],
	int64: [8, (v, o, x) => v.setBigInt64(o, x, true)],
	uint64: [8, (v, o, x) => v.setBigUint64(o, x, true)],
};

function isCOrder(shape, stride) {
	let want = 1;
	for (let i = shape.length - 1; i >= 0; i--) {
		if (shape[i] > 1 && stride[i] !== want) {
			return false;
		}
		want *= shape[i];
	}
	return true;
}

const SLAB_BYTES = 64 << 20;

async function dumpArray(store, node) {
	const arr = await zarr.open.v3(zarr.root(store).resolve(node), { kind: "array" });
	const enc = encoders[arr.dtype];
	if (!enc) {
		throw new Error(`${node}: no encoder for ${arr.dtype}`);
	}
	const [size, put] = enc;
	const [n, ...rest] = arr.shape;
	const perSample = rest.reduce((a, b) => a * b, 1);
	const slab = Math.max(1, Math.floor(SLAB_BYTES / (perSample * size)));
	const file = path.join(outDir, `${node}.bin`);
	const fd = fs.openSync(file, "w");
	let values = 0;
	try {
		for (let lo = 0; lo < n; lo += slab) {
			const hi = Math.min(n, lo + slab);
			const chunk = await zarr.get(arr, [zarr.slice(lo, hi), ...rest.map(() => null)]);
			if (!isCOrder(chunk.shape, chunk.stride)) {
				throw new Error(`${node}: zarrita returned strides ${chunk.stride} for shape ${chunk.shape}`);
			}
			const count = chunk.shape.reduce((a, b) => a * b, 1);
			const buf = Buffer.alloc(count * size);
			const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
			for (let i = 0; i < count; i++) {
				put(view, i * size, chunk.data[i]);
			}
			fs.writeSync(fd, buf);
			values += count;
		}
	} finally {
		fs.closeSync(fd);
	}
	return {
		data_type: arr.dtype,
		shape: arr.shape,
		chunks: arr.chunks,
		dimension_names: arr.dimensionNames ?? null,
		fill_value: typeof arr.fillValue === "bigint" ? arr.fillValue.toString() : arr.fillValue,
		attributes: arr.attrs,
		values,
		file,
	};
}

const store = new FileSystemStore(path.resolve(storeDir));
const result = { root: null, arrays: {}, shards: {} };
fs.mkdirSync(outDir, { recursive: true });
for (const node of findNodes(storeDir, "", [])) {
	const meta = JSON.parse(fs.readFileSync(path.join(storeDir, node, "zarr.json"), "utf8"));
	if (meta.node_type === "group") {
		const group = await zarr.open.v3(zarr.root(store).resolve(node === "" ? "/" : node), { kind: "group" });
		if (node === "") {
			result.root = { attributes: group.attrs };
		}
		continue;
	}
	result.arrays[node] = await dumpArray(store, node);
	result.shards[node] = checkShards(node, meta);
}
process.stdout.write(JSON.stringify(result));
