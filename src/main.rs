//! The `weir` command line: validate graphs, run them over workloads, serve them, train and plan,
//! profile, and run benchmarks ([`weir::cli`] has one module per command).

fn main() -> std::process::ExitCode {
    weir::cli::main()
}
