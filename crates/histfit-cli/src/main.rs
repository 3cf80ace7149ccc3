//! `histfit`: the command-line front end. It parses arguments, loads and compiles the workspace,
//! calls `histfit-infer`, and formats the result as a table or JSON — one module per command
//! ([`commands`]). No statistics live here. Errors print one line on stderr and exit with
//! status 2.

mod commands;
mod device;
mod model_args;
mod output;
mod progress;
mod timing;

use clap::Parser;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "histfit",
    version,
    about = "Fast statistics for binned HistFactory models (pyhf JSON, XML) and event-level models (HS3)"
)]
struct Cli {
    #[command(subcommand)]
    command: commands::Command,
}

fn main() -> ExitCode {
    timing::start();
    keep_freed_memory();
    // A panic a third-party decoder throws on a malformed file is caught and said as an error
    // naming the file; the default hook would print it first as if the program had failed.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !histfit_events::panic_is_guarded(info) {
            report(info)
        }
    }));
    histfit_device::skip_display_probe();
    match Cli::parse().command.run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// glibc returns every freed block above 128 kB (raised as larger ones are freed) to the kernel
/// at once, and a later block of that size is mapped, faulted in and zeroed again page by page:
/// a command reads, parses and compiles a workspace through a series of such temporaries (the
/// text, the tree, the tables). Kept in the heap instead (blocks up to 32 MiB, glibc's largest
/// mmap threshold on 64-bit; larger ones are still mapped), a whole `histfit fit` of tHu faults in
/// 470 fewer pages (1 636 → 1 167): 17.1 → 16.5 ms, and `histfit inspect` 9.5 → 8.7 ms (dev-vm,
/// medians of 100 interleaved runs). The memory kept goes back to the kernel when the process
/// ends, which for a command is soon.
///
/// The heap's first 16 MiB beyond what start-up used are then asked for on transparent huge
/// pages (what glibc's `glibc.malloc.hugetlb=1` tunable does, which a program cannot set for
/// itself once started): where the kernel grants them (`enabled` = `madvise` or `always`), the
/// ≈ 9 MB a tHu fit touches arrive in a few 2 MiB faults instead of ≈ 900 of 4 kB, each of which
/// traps into the kernel (page faults 1 071 → 156; BENCHMARKS.md, issue 22). The price: up to
/// 2 MiB of resident memory per huge page touched, and, with the kernel's `defrag` = `madvise`,
/// a fault that may compact memory on a fragmented host. A user's own allocator settings
/// (`MALLOC_*_`, `GLIBC_TUNABLES`) are left in force.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let user_set = std::env::vars_os().any(|(k, _)| {
            let k = k.to_string_lossy();
            k.starts_with("MALLOC_") || k == "GLIBC_TUNABLES"
        });
        if user_set {
            return;
        }
        const LIMIT: libc::c_int = 32 << 20;
        // SAFETY: mallopt only sets allocator parameters; it is called before any thread
        // starts. The trim threshold is set only where the mmap one was accepted (setting it
        // alone would switch off glibc's own raising of the mmap threshold); see
        // `huge_pages_ahead` for the rest.
        unsafe {
            if libc::mallopt(libc::M_MMAP_THRESHOLD, LIMIT) == 1 {
                libc::mallopt(libc::M_TRIM_THRESHOLD, LIMIT);
                huge_pages_ahead();
            }
        }
    }
}

/// Grows the main heap by 16 MiB now and marks its whole 2 MiB pages for transparent huge pages
/// (see [`keep_freed_memory`]); glibc's pad is back at its default after, so later growth of this
/// heap and the heaps of other threads' arenas are as before.
///
/// # Safety
/// Called once, before any thread starts. sbrk(0) only reads the break; the heap grows
/// through malloc itself; madvise only advises on whole 2 MiB pages inside the heap's new part
/// (an error, e.g. from a kernel without transparent huge pages, changes nothing and is
/// ignored); the block that fills the rest is never freed nor written.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe fn huge_pages_ahead() {
    const HUGE: usize = 2 << 20;
    const GROW: usize = 1 << 20;
    const PAD: libc::c_int = 16 << 20;
    const DEFAULT_PAD: libc::c_int = 128 << 10;
    if libc::mallopt(libc::M_TOP_PAD, PAD) != 1 {
        return;
    }
    let failed = |p: *mut libc::c_void| p as usize == usize::MAX;
    let start = libc::sbrk(0);
    // A block larger than what is left of the heap makes it grow by the block and the pad. It
    // is cut from the old top of the heap, below `start`; splitting it off wrote the header of
    // the free space after it, at its end (black_box: a malloc whose block is freed unused is
    // otherwise optimised away).
    let block = std::hint::black_box(libc::malloc(GROW));
    libc::free(block);
    libc::mallopt(libc::M_TOP_PAD, DEFAULT_PAD);
    let end = libc::sbrk(0);
    if failed(start) || failed(end) || block.is_null() {
        return;
    }
    let (start, end, block) = (start as usize, end as usize, block as usize);
    // Past that header: a page faulted in small keeps its whole 2 MiB range in small pages.
    let from = (start.max(block + GROW) + (64 << 10)).next_multiple_of(HUGE);
    let to = end - end % HUGE;
    if block >= start || to <= from {
        // The heap did not grow from its old top (the block came from free space or from a
        // mapping of its own): nothing to mark.
        return;
    }
    libc::madvise(from as *mut libc::c_void, to - from, libc::MADV_HUGEPAGE);
    // Below the first whole huge page the heap stays in small pages: a block that is never used
    // (its pages never touched) fills it from where the growth block was, so that what the
    // command allocates next starts on huge pages.
    std::hint::black_box(libc::malloc(from - block - 4096));
}
