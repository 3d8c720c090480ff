fn main() -> std::process::ExitCode {
    aid::cli::main()
}
