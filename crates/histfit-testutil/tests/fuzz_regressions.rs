//! Every input the fuzz targets found (a crash, a hang, an error without a rule) replayed on
//! stable through the same invariant checks (`histfit_testutil::inputs`), with the seeds and the
//! minimized corpora; each finding's file is named by the fuzzer, and the fix names it.

use histfit_testutil::inputs;
use std::path::PathBuf;

fn files(dir: &str) -> Vec<PathBuf> {
    let dir = histfit_testutil::repo_root().join("fuzz").join(dir);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = entries.map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

/// CPU seconds this thread has run (Linux: /proc/thread-self/stat, in clock ticks of 10 ms),
/// or None elsewhere. The 1 s limit is the fuzzer's, on an otherwise idle core: the test suite
/// runs beside other test binaries, where wall time also counts the waits for a core.
fn thread_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    // Fields after the command name's closing parenthesis: utime and stime are the 12th and
    // 13th of them (fields 14 and 15 of the line).
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0)
}

/// Replays every input of `target`, naming each before it runs (an abort then says which) and
/// reporting all that break an invariant or take longer than the fuzzer's 1 s (of CPU time where
/// the system reports it, else of wall time; the best of three runs for an input over it).
fn replay(target: &str, check: impl Fn(&[u8])) {
    let (mut n, mut broken, mut slowest) = (0, Vec::new(), 0.0f64);
    for sub in ["regressions", "seeds", "corpus"] {
        for f in files(&format!("{sub}/{target}")) {
            eprintln!("{target}: {}", f.display());
            let bytes = std::fs::read(&f).unwrap();
            let timed = || {
                let (wall, cpu) = (std::time::Instant::now(), thread_cpu_seconds());
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| check(&bytes)));
                let seconds = match (cpu, thread_cpu_seconds()) {
                    (Some(a), Some(b)) => b - a,
                    _ => wall.elapsed().as_secs_f64(),
                };
                (run, seconds)
            };
            let (run, mut seconds) = timed();
            // Noise only adds time: an input is slow when the fastest of three runs is. (The
            // largest findings allocate ~250 MB; their page faults, counted as the thread's
            // system time, took 0.4–1.2 s of CPU on one machine from run to run.)
            for _ in 0..2 {
                if run.is_err() || seconds <= 1.0 {
                    break;
                }
                seconds = seconds.min(timed().1);
            }
            slowest = slowest.max(seconds);
            if run.is_err() || seconds > 1.0 {
                broken.push(format!("{} ({seconds:.2} s)", f.display()));
            }
            n += 1;
        }
    }
    assert!(n > 0, "{target}: nothing to replay");
    assert!(
        broken.is_empty(),
        "{target}: inputs that break an invariant: {broken:#?}"
    );
    println!("{target}: {n} inputs replayed, the slowest in {slowest:.2} s");
}

/// The two findings, pinned to their fixes' messages.
#[test]
fn findings_give_their_messages() {
    let text = std::fs::read(
        histfit_testutil::repo_root()
            .join("fuzz/regressions/workspace_json/crash-a4cedc8ac17e52591bc3fbfda9aaba7c56b5c218"),
    )
    .unwrap();
    let e = histfit_model::Workspace::from_str(std::str::from_utf8(&text).unwrap(), "x.json")
        .unwrap_err();
    assert!(e.rule.contains("malformed JSON"), "{e}");
    let text = std::fs::read_to_string(
        histfit_testutil::repo_root()
            .join("fuzz/regressions/workspace_json/crash-713d63fb7b08db728fe90bb165b1fb471528d2f9"),
    )
    .unwrap();
    let ws = histfit_model::Workspace::from_str(&text, "x.json").unwrap();
    let model = histfit_model::compile(&ws, None, &histfit_model::Settings::smooth()).unwrap();
    assert!(
        model
            .warnings
            .iter()
            .any(|w| w.contains("channel \"singlechannel\" bin 0: 0.05 events observed")),
        "{:?}",
        model.warnings
    );
}

/// structured-crash-2b1ba5b0 (and -1d6b0d69, -c5475ad1): a lumi σ of 1e-300 gave a NaN
/// gradient (0/0 at θ = aux); refused by name.
#[test]
fn a_width_too_small_is_refused_by_name() {
    let text = std::fs::read_to_string(
        histfit_testutil::repo_root()
            .join("fuzz/regressions/workspace_json/structured-crash-2b1ba5b0.json"),
    )
    .unwrap();
    let ws = histfit_model::Workspace::from_str(&text, "x.json").unwrap();
    let e = histfit_model::compile(&ws, None, &histfit_model::Settings::smooth()).unwrap_err();
    assert!(
        e.place.contains("\"lumi\"") && e.rule.contains("width 1e-300 is too small"),
        "{e}"
    );
}

/// What made the parquet crate allocate gigabytes or loop for seconds — a footer's schema
/// claiming 2²⁸ children (6.4 GB, 7.5 GB), page headers claiming billions of elements past their
/// end, footers whose headers lie about their known fields' types, pages claiming gigabytes
/// uncompressed for 8 values (reserved lazily natively: only a message tells the fix holds) — is
/// refused before the crate decodes it (`histfit_events::thrift_guard`).
#[test]
fn parquet_thrift_claims_beyond_their_bytes_are_refused() {
    let spec = histfit_events::parquet::SourceSpec {
        file: "fuzzed.parquet".into(),
        columns: vec![histfit_events::parquet::ColumnRequest {
            observable: "x".into(),
            column: "x".into(),
            lo: 60.0,
            hi: 120.0,
        }],
        weight: None,
        drop_outside: true,
    };
    for (name, what) in [
        (
            "oom-25fe989c869768f001baf6e339935e322878733e",
            "its footer claims",
        ),
        (
            "timeout-959e9e8ce513c4e4a26090e700ace91be8e7dea3",
            "a page header at byte 95 claims",
        ),
        (
            "oom-4d85736952268eeccabec2a7b24957b1a9070cae",
            "its footer claims",
        ),
        (
            "timeout-2c9c227572470231155e49fc115ef0b01169967c",
            "its footer claims",
        ),
        (
            "timeout-a12d6ad6e58fc89aa834a4275ccb1d4294231153",
            "its footer claims",
        ),
        (
            "oom-f658f27f91ac9e7ad9378018ddd189fb9f214370",
            "claims 1623229186 bytes for 8 values",
        ),
        (
            "oom-3af70534a8bb40495b099e148e847458f61ab543",
            "claims 1623229186 bytes for 8 values",
        ),
        (
            "oom-fc5fd7fe764e08cec0c667979cf3fd4f98eea0d2",
            "claims 1995299767 bytes for 8 values",
        ),
        (
            "timeout-38f01e11071b79d6c0464dee531e4bfd79ebaa05",
            "bytes for 8 values",
        ),
        (
            "timeout-471987ef211eb691ae271a585e91d2827d1957bb",
            "bytes for 8 values",
        ),
    ] {
        let bytes = std::fs::read(
            histfit_testutil::repo_root()
                .join("fuzz/regressions/parquet_events")
                .join(name),
        )
        .unwrap();
        let e = histfit_events::parquet::read_parquet_bytes(bytes, &spec).unwrap_err();
        assert!(e.rule.contains(what), "{name}: {}", e.rule);
    }
}

#[test]
fn workspace_json() {
    replay("workspace_json", inputs::workspace_bytes);
}

#[test]
fn hs3_json() {
    replay("hs3_json", inputs::hs3_bytes);
}

#[test]
fn parquet_events() {
    replay("parquet_events", inputs::parquet_bytes);
}

#[test]
fn expression() {
    replay("expression", inputs::expression_bytes);
}

#[test]
fn patchset() {
    let bases: Vec<serde_json::Value> = [
        "simple_workspace.json",
        "complex_workspace.json",
        "two_channel_workspace.json",
    ]
    .iter()
    .map(|n| histfit_testutil::json(n))
    .collect();
    replay("patchset", |d| {
        if let Some((&pick, rest)) = d.split_first() {
            inputs::patchset_bytes(&bases[pick as usize % bases.len()], rest)
        }
    });
}

#[test]
fn root_file() {
    replay("root_file", inputs::root_bytes);
}

#[test]
fn root_tree() {
    replay("root_tree", inputs::root_tree_bytes);
}

#[test]
fn xml_import() {
    let dir = std::env::temp_dir().join(format!("histfit-fuzz-replay-{}", std::process::id()));
    inputs::xml_sandbox(&dir);
    replay("xml_import", |d| inputs::xml_bytes(&dir, d));
    let _ = std::fs::remove_dir_all(&dir);
}

/// root_file crash-77096f5a: an xz block whose footer makes lzma-rs overflow (a panic where
/// overflow checks are on, as in this test build) is refused as a malformed block.
#[test]
fn xz_decoder_panic_is_a_malformed_block() {
    let path = histfit_testutil::repo_root()
        .join("fuzz/regressions/root_file/crash-77096f5a6b78054c456431eec01f4b566d38625d");
    let mut file = histfit_import::RootFile::from_bytes(&path, std::fs::read(&path).unwrap())
        .expect("the header and directory read");
    let keys = file.keys("").expect("the top directory lists").to_vec();
    let rules: Vec<String> = keys
        .iter()
        .filter_map(|k| file.histogram(&k.name).err().map(|e| e.rule))
        .collect();
    assert!(rules.iter().any(|r| r.contains("xz block")), "{rules:?}");
}
