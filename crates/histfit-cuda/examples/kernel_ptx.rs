//! Kernel development: compiles the CUDA kernels (the built-in source, or the file named as the
//! first argument) with the options the library uses, for the architecture named second
//! (`sm_90` unless given), and prints the PTX on stdout. No GPU is needed, only NVRTC, so that a
//! variant's registers and spills can be read with `ptxas -v` before any device time is spent:
//! `cargo run -p histfit-cuda --example kernel_ptx -- [FILE.cu|-] [sm_90] > k.ptx &&
//! ptxas -v -arch=sm_90 k.ptx -o /dev/null`.

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let source = match args.first().map(String::as_str) {
        None | Some("-") => histfit_cuda::kernels::SOURCE.to_string(),
        Some(path) => std::fs::read_to_string(path).unwrap_or_else(|e| {
            eprintln!("{path}: {e}");
            std::process::exit(2)
        }),
    };
    let arch: &'static str = Box::leak(
        args.get(1)
            .cloned()
            .unwrap_or_else(|| "sm_90".to_string())
            .into_boxed_str(),
    );
    match histfit_cuda::kernels::compile(&source, arch) {
        Ok(ptx) => print!("{}", ptx.to_src()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}
