//! The `crd-apiserver` binary: parses the command line and runs a subcommand.

use clap::Parser;
use crd_apiserver::cli::{self, Cli, Command};
use crd_apiserver::core::nesting::THREAD_STACK_BYTES;

/// mimalloc instead of glibc's malloc: allocation was a fifth of a request's instructions
/// (ARCHITECTURE.md, entry points).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> anyhow::Result<()> {
    let args = Cli::parse();
    crd_apiserver::logs::init(&crd_apiserver::logs::Options { verbosity: args.verbosity, format: args.logging_format });
    match args.command {
        Command::Serve(serve) => {
            let runtime = objects_runtime()?;
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
            let runtime = objects_runtime()?;
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

/// A runtime for commands that handle objects: its threads (workers and blocking) get the stack
/// a walk of the deepest object needs (`core::nesting`); the default 2 MiB would overflow on a
/// body nested 10,000 deep, as kube-apiserver accepts.
fn objects_runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread().thread_stack_size(THREAD_STACK_BYTES).enable_all().build()
}
