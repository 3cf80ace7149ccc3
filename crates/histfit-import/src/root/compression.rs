//! ROOT's compressed records: a sequence of blocks, each a 9-byte header (two letters naming the
//! algorithm, one method byte, the compressed and uncompressed sizes as 24-bit little-endian
//! numbers) followed by the compressed bytes. ZL is zlib, L4 an LZ4 block after an 8-byte xxhash64
//! checksum, ZS a zstd frame, XZ an xz stream. Blocks hold at most 16 MiB each, so memory grows
//! with what the blocks really produce, never with a size the file merely claims.

use std::io::Read;

const HEADER: usize = 9;
const LZ4_CHECKSUM: usize = 8;

/// Inflates `raw` (a key's stored bytes) into `expected` bytes, or says why it cannot.
pub fn decompress(raw: &[u8], expected: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(expected.min(raw.len().saturating_mul(4)));
    let mut pos = 0;
    while out.len() < expected {
        let header = raw
            .get(pos..pos + HEADER)
            .ok_or("compressed data end before the object is complete")?;
        let algorithm = [header[0], header[1]];
        let size_in = u24(&header[3..6]);
        let size_out = u24(&header[6..9]);
        let block = raw
            .get(pos + HEADER..pos + HEADER + size_in)
            .ok_or("a compressed block runs past the end of the record")?;
        // A block that would inflate past the object is malformed: refused before anything is
        // allocated for it (fuzzing found LZ4 headers claiming 16 MB in a 1 kB file).
        if size_out > expected - out.len() {
            return Err(format!(
                "a compressed block inflates to {size_out} bytes, more than the {} left of the object",
                expected - out.len()
            ));
        }
        let before = out.len();
        match &algorithm {
            b"ZL" => {
                flate2::read::ZlibDecoder::new(block)
                    .take(size_out as u64)
                    .read_to_end(&mut out)
                    .map_err(|e| format!("zlib block: {e}"))?;
            }
            b"L4" => {
                let payload = block
                    .get(LZ4_CHECKSUM..)
                    .ok_or("an LZ4 block shorter than its checksum")?;
                let start = out.len();
                out.resize(start + size_out, 0);
                let n = lz4_flex::block::decompress_into(payload, &mut out[start..])
                    .map_err(|e| format!("LZ4 block: {e}"))?;
                out.truncate(start + n);
            }
            b"ZS" => {
                let decoder = ruzstd::decoding::StreamingDecoder::new(block)
                    .map_err(|e| format!("zstd block: {e}"))?;
                decoder
                    .take(size_out as u64)
                    .read_to_end(&mut out)
                    .map_err(|e| format!("zstd block: {e}"))?;
            }
            b"XZ" => {
                let mut sink = Bounded {
                    out: &mut out,
                    room: size_out,
                };
                // lzma-rs panics on some malformed streams where overflow checks are on (an
                // index size computed from a footer's 2³²−1; fuzz: root_file crash-77096f5a):
                // a panic of the decoder is a malformed block here, never the process's end.
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    lzma_rs::xz_decompress(&mut &block[..], &mut sink)
                }))
                .map_err(|_| "xz block: malformed stream (the decoder gave up)".to_string())?
                .map_err(|e| format!("xz block: {e}"))?;
            }
            b"CS" => return Err("ROOT's old compression algorithm (CS) is not supported".into()),
            other => {
                return Err(format!(
                    "unknown compression algorithm {:?}",
                    String::from_utf8_lossy(other)
                ))
            }
        }
        if out.len() - before != size_out {
            return Err(format!(
                "a compressed block gave {} bytes where its header says {size_out}",
                out.len() - before
            ));
        }
        pos += HEADER + size_in;
    }
    if out.len() != expected {
        return Err(format!(
            "decompressed to {} bytes where the key says {expected}",
            out.len()
        ));
    }
    Ok(out)
}

fn u24(b: &[u8]) -> usize {
    b[0] as usize | (b[1] as usize) << 8 | (b[2] as usize) << 16
}

/// A writer that refuses more bytes than the block header announced (a stream that would inflate
/// beyond it is malformed, and stopping early keeps memory bounded).
struct Bounded<'a> {
    out: &'a mut Vec<u8>,
    room: usize,
}

impl std::io::Write for Bounded<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.room {
            return Err(std::io::Error::other(
                "inflates beyond the size its block header gives",
            ));
        }
        self.room -= buf.len();
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
