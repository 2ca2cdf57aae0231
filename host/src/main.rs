//! The `justonce` binary: a thin shell over the library's command line.
fn main() -> std::process::ExitCode {
    justonce::main_cli()
}
