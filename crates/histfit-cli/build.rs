//! Links `histfit` as a position-dependent executable on Linux with glibc: a position-independent
//! one spends its start applying ≈ 13 000 relative relocations to its tables, touching their
//! pages (`histfit --version` 1.83 → 1.34 ms, `histfit fit` of tHu −0.25 ms on dev-vm;
//! BENCHMARKS.md, issue 22). The code is compiled position-independent either way; the price is
//! that the executable's own load address is no longer randomised (libraries, heap and stack
//! still are). Not for static builds (`crt-static` links `-static-pie`, which `-no-pie` would
//! break without a word), and `HISTFIT_PIE=1` at build time keeps the default.
fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=HISTFIT_PIE");
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    let linux_gnu = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let static_crt = var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static");
    if linux_gnu && !static_crt && var("HISTFIT_PIE") != "1" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
