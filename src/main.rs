//! The `crd-apiserver` binary: parses the command line and runs a subcommand.

use clap::Parser;
use crd_apiserver::cli::{self, Cli, Command};

fn init_logging(verbosity: u8) {
    let default = match verbosity {
        0..=3 => "info",
        4..=5 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default},sled=warn,h2=warn,hyper=warn,rustls=warn"))
    });
    // Colour codes only for a terminal: logs collected from a pipe or a file stay plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi).init();
}

fn main() -> anyhow::Result<()> {
    let args = Cli::parse();
    init_logging(args.verbosity);
    match args.command {
        Command::Serve(serve) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            runtime.block_on(cli::serve::run(*serve))?;
            Ok(())
        }
        Command::Check(check) => std::process::exit(cli::check(&check)),
        Command::Validate(args) => std::process::exit(cli::validate::run(&args)),
        Command::Manifests(args) => std::process::exit(cli::manifests::run(&args)),
        Command::DevPki(args) => {
            let pki = cli::pki::DevPki::ensure(&args.dir)?;
            let kubeconfig = pki.write_kubeconfig(&format!("https://127.0.0.1:{}", args.port))?;
            println!("development PKI in {}; kubeconfig {}", args.dir.display(), kubeconfig.display());
            Ok(())
        }
    }
}
