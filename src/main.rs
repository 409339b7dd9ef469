//! The `crd-apiserver` binary: parses the command line and runs a subcommand.

use clap::Parser;
use crd_apiserver::cli::{self, Cli, Command};

/// mimalloc instead of glibc's malloc: allocation was a fifth of a request's instructions
/// (ARCHITECTURE.md, entry points).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args = Cli::parse();
    crd_apiserver::logs::init(&crd_apiserver::logs::Options { verbosity: args.verbosity, format: args.logging_format });
    match args.command {
        Command::Serve(serve) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            if let Err(e) = runtime.block_on(cli::serve::run(*serve)) {
                // In the log's format (a JSON line under --logging-format=json), as
                // component-base's runner reports a failed command.
                tracing::error!(error = %e, "command failed");
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Check(check) => std::process::exit(cli::check(&check)),
        Command::Validate(args) => std::process::exit(cli::validate::run(&args)),
        Command::Impact(args) => std::process::exit(cli::impact::run(&args)),
        Command::Manifests(args) => std::process::exit(cli::manifests::run(&args)),
        Command::MigrateStorage(args) => {
            let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
            std::process::exit(runtime.block_on(cli::migrate_storage::run(&args)))
        }
        Command::DeleteObjects(args) => std::process::exit(cli::delete_objects::run(&args)),
        Command::Backup(args) => std::process::exit(cli::backup::run_backup(&args)),
        Command::Restore(args) => std::process::exit(cli::backup::run_restore(&args)),
        Command::Takeover(args) => std::process::exit(cli::takeover::run(&args, false)),
        Command::Handback(args) => std::process::exit(cli::takeover::run(&args, true)),
        Command::DevPki(args) => {
            let pki = cli::pki::DevPki::ensure(&args.dir)?;
            let kubeconfig = pki.write_kubeconfig(&format!("https://127.0.0.1:{}", args.port))?;
            println!("development PKI in {}; kubeconfig {}", args.dir.display(), kubeconfig.display());
            Ok(())
        }
    }
}
