//! Reading events from Parquet: 100 000 events × 4 double columns (the figure), written
//! here once by the parquet crate's own writer (uncompressed and snappy, one row group, PLAIN
//! pages): `read_parquet` from the file (map, decode into f64 columns, domain check), and the
//! decoding alone from bytes in memory, on one thread and on all (a large single row group's
//! columns are read in parallel). Freed memory is kept by the
//! allocator as the `histfit` binary keeps it (so that each iteration does not fault in fresh
//! pages for its 3.2 MB of columns). `cargo bench -p histfit-events --bench parquet`.

use criterion::{criterion_group, criterion_main, Criterion};
use histfit_events::{read_parquet, read_parquet_bytes, ColumnRequest, SourceSpec};
use parquet::basic::Compression;
use parquet::data_type::DoubleType;
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;
use std::path::{Path, PathBuf};
use std::sync::Arc;

const N: usize = 100_000;
const COLUMNS: [&str; 4] = ["a", "b", "c", "d"];

fn write(path: &Path, compression: Compression) {
    let schema = Arc::new(
        parse_message_type(
            "message events { REQUIRED DOUBLE a; REQUIRED DOUBLE b; REQUIRED DOUBLE c; REQUIRED DOUBLE d; }",
        )
        .unwrap(),
    );
    let props = Arc::new(
        WriterProperties::builder()
            .set_compression(compression)
            .set_dictionary_enabled(false)
            .build(),
    );
    let file = std::fs::File::create(path).unwrap();
    let mut writer = SerializedFileWriter::new(file, schema, props).unwrap();
    let mut group = writer.next_row_group().unwrap();
    let mut k = 0;
    while let Some(mut column) = group.next_column().unwrap() {
        let values: Vec<f64> = (0..N)
            .map(|i| 60.0 + 60.0 * ((i as f64 * 0.754_877_666 + k as f64 * 0.1) % 1.0))
            .collect();
        column
            .typed::<DoubleType>()
            .write_batch(&values, None, None)
            .unwrap();
        column.close().unwrap();
        k += 1;
    }
    group.close().unwrap();
    writer.close().unwrap();
}

fn spec(file: PathBuf) -> SourceSpec {
    SourceSpec {
        file,
        columns: COLUMNS
            .iter()
            .map(|c| ColumnRequest {
                observable: c.to_string(),
                column: c.to_string(),
                lo: 60.0,
                hi: 120.0,
            })
            .collect(),
        weight: None,
        drop_outside: false,
    }
}

fn bench(c: &mut Criterion) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: allocator parameters, set before the benchmark's threads start (as the CLI does).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 32 << 20);
    }
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("histfit-parquet-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, compression) in [
        ("uncompressed", Compression::UNCOMPRESSED),
        ("snappy", Compression::SNAPPY),
    ] {
        let path = dir.join(format!("{name}.parquet"));
        write(&path, compression);
        let s = spec(path);
        assert_eq!(read_parquet(&s).unwrap().table.len(), N);
        c.bench_function(
            &format!("parquet 100k events x 4 columns, {name}, 1 thread"),
            |b| b.iter(|| one.install(|| read_parquet(&s).unwrap())),
        );
        let bytes = bytes::Bytes::from(std::fs::read(&s.file).unwrap());
        c.bench_function(
            &format!("parquet decode 100k x 4 from memory, {name}, 1 thread"),
            |b| b.iter(|| one.install(|| read_parquet_bytes(bytes.clone(), &s).unwrap())),
        );
        c.bench_function(
            &format!("parquet decode 100k x 4 from memory, {name}, all threads"),
            |b| b.iter(|| read_parquet_bytes(bytes.clone(), &s).unwrap()),
        );
    }
    std::fs::remove_dir_all(&dir).ok();
}

criterion_group!(benches, bench);
criterion_main!(benches);
