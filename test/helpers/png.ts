import { crc32, deflateSync } from 'node:zlib';

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type, 'latin1'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}

/**
 * A real PNG (RGB, 8 bits) of `side`×`side` pixels of deterministic noise, which does not
 * compress: about 3·side² bytes. 600 gives about 1.1 MB.
 */
export function noisePng(side: number, seed = 1): Buffer {
  const row = 1 + side * 3;
  const raw = Buffer.alloc(row * side);
  let x = seed >>> 0;
  for (let y = 0; y < side; y++) {
    raw[y * row] = 0; // filter: none
    for (let i = 1; i < row; i++) {
      x = (Math.imul(x, 1_103_515_245) + 12_345) >>> 0;
      raw[y * row + i] = x >>> 24;
    }
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(side, 0);
  ihdr.writeUInt32BE(side, 4);
  ihdr.set([8, 2, 0, 0, 0], 8);
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}
