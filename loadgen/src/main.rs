//! The `loadgen` binary: parse the command line, run, print the table, exit with the verdict.

use clap::Parser;
use std::process::ExitCode;

#[global_allocator]
static ALLOC: wire::alloc::GuardedAlloc<mimalloc::MiMalloc> =
    wire::alloc::GuardedAlloc(mimalloc::MiMalloc);

fn main() -> ExitCode {
    let args = loadgen::Args::parse();
    match loadgen::run(&args) {
        Ok(outcome) => {
            print!("{}", outcome.table);
            ExitCode::from(outcome.exit_code as u8)
        }
        Err(e) => {
            eprintln!("loadgen: {e}");
            ExitCode::from(loadgen::EXIT_SETUP as u8)
        }
    }
}
