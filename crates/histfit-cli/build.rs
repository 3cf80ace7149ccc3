//! Links `histfit` as a position-dependent executable on Linux with glibc: a position-independent
//! one spends its start applying ≈ 13 000 relative relocations to its tables, touching their
//! pages (`histfit --version` 1.83 → 1.34 ms, `histfit fit` of tHu −0.25 ms on dev-vm;
//! BENCHMARKS.md, issue 22). The code is compiled position-independent either way; only the
//! binary's own load address stops being randomised.
fn main() {
    let linux_gnu = std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux")
        && std::env::var("CARGO_CFG_TARGET_ENV").as_deref() == Ok("gnu");
    if linux_gnu {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
}
