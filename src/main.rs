use std::process::ExitCode;

fn main() -> ExitCode {
    karpor::cli::run()
}
