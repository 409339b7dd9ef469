//! `crd-apiserver takeover CRD-NAME...` and `crd-apiserver handback CRD-NAME...`: asks a
//! running server (`--server`, its `/takeover` or `/handback` path, authenticated and
//! authorized as every request is) to move definitions' objects from the main apiserver or
//! back (`takeover`), prints its progress lines and report. The server does the work: it
//! holds the store and the credentials for the main apiserver; a broken connection leaves the
//! run going there, and running the command again resumes it.

use clap::Args;
use http_body_util::BodyExt;

use super::server_client::{ServerClient, ServerFlags};
use crate::takeover::json;

#[derive(Debug, Args)]
pub struct TakeoverArgs {
    /// Names of CustomResourceDefinitions (`<plural>.<group>`).
    #[arg(required = true)]
    pub names: Vec<String>,
    /// Report what would move; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The running server (`https://HOST:PORT`).
    #[arg(long)]
    pub server: String,
    /// Its CA and the credentials to call it with.
    #[command(flatten)]
    pub connection: ServerFlags,
}

/// Runs `takeover` (`handback` when `back`); returns the exit code.
pub fn run(args: &TakeoverArgs, back: bool) -> i32 {
    let outcome = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| rt.block_on(call(args, back)));
    match outcome {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(message) => {
            eprintln!("error: {message}");
            1
        }
    }
}

/// Prints one line of the server's answer; false for an error line.
fn print_line(line: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(line) else {
        println!("{}", String::from_utf8_lossy(line));
        return true;
    };
    if let Some(progress) = json::at(&value, "/progress").as_str() {
        println!("{progress}");
        true
    } else if let Some(error) = json::at(&value, "/error").as_str() {
        eprintln!("error: {error}");
        false
    } else if let Some(report) = value.get("report") {
        print_report(report);
        true
    } else {
        println!("{value}");
        true
    }
}

fn print_report(report: &serde_json::Value) {
    let name = json::at(report, "/name").as_str().unwrap_or_default();
    let objects = json::at(report, "/objects").as_u64().unwrap_or(0);
    let bytes = json::at(report, "/bytes").as_u64().unwrap_or(0);
    if json::at(report, "/dryRun") == true {
        println!(
            "{name}: would move {objects} objects ({bytes} bytes) at the main apiserver's resourceVersion {}; \
             APIServices {}",
            json::at(report, "/mainRevision"),
            json::at(report, "/apiServices")
                .as_array()
                .map(|a| a.iter().filter_map(|s| s.as_str()).collect::<Vec<_>>().join(", "))
                .unwrap_or_default()
        );
    } else {
        println!(
            "{name}: moved {objects} objects ({bytes} bytes); writes were refused for {:.2}s ({:.0} objects/s)",
            json::at(report, "/freezeSeconds").as_f64().unwrap_or(0.0),
            json::at(report, "/objectsPerSecond").as_f64().unwrap_or(0.0)
        );
    }
    for note in json::at(report, "/notes").as_array().into_iter().flatten() {
        println!("  {}", note.as_str().unwrap_or_default());
    }
}

async fn call(args: &TakeoverArgs, back: bool) -> Result<bool, String> {
    let client = ServerClient::new(&args.connection)?;
    let mut ok = true;
    for name in &args.names {
        let mut query = form_urlencoded::Serializer::new(String::new());
        query.append_pair("name", name);
        if args.dry_run {
            query.append_pair("dryRun", "All");
        }
        let verb = if back { "handback" } else { "takeover" };
        let uri: http::Uri = format!("{}/{verb}?{}", args.server.trim_end_matches('/'), query.finish())
            .parse()
            .map_err(|e| format!("--server: {e}"))?;
        let mut body = client.send(http::Method::POST, &uri).await?;
        let mut pending = Vec::new();
        let mut finished = false;
        while let Some(frame) = body.frame().await {
            let frame = frame.map_err(|e| {
                format!(
                    "POST {uri}: the stream broke: {e} (the server goes on; run the command again to see where it is)"
                )
            })?;
            let Ok(data) = frame.into_data() else { continue };
            pending.extend_from_slice(&data);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let line = line.strip_suffix(b"\n").unwrap_or(&line);
                if line.is_empty() {
                    continue;
                }
                let is_end = line.starts_with(b"{\"report\"") || line.starts_with(b"{\"error\"");
                ok &= print_line(line);
                finished |= is_end;
            }
        }
        if !finished {
            return Err(format!("POST {uri}: the answer ended early (run the command again to resume)"));
        }
    }
    Ok(ok)
}
