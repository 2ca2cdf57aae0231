//! The `justonce` binary: a thin shell over [`justonce::cli`].
fn main() -> std::process::ExitCode {
    justonce::cli::main()
}
