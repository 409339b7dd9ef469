//! `--cluster-definitions-selector` and `--cluster-definitions`: the main apiserver's
//! CustomResourceDefinitions served besides the files. Checks the flags at start (a selector
//! in the API's syntax, names, a client of the main apiserver to read them with) and starts
//! following them (`kube::cluster_definitions`), registered for `/readyz`'s informer-sync.
//!
//! Owns the flags' meaning; what is served is the reloader's (`live_definitions`).

use std::sync::Arc;

use super::ServeArgs;
use super::serve::StartError;
use crate::api::selectors::LabelSelector;
use crate::kube::cluster_definitions::{ClusterDefinitions, Wanted};
use crate::server::health::Informers;

/// What the flags ask for, checked.
pub fn wanted(args: &ServeArgs) -> Result<Wanted, StartError> {
    let selector = args.cluster_definitions_selector.as_deref().map(str::trim).filter(|s| !s.is_empty());
    if let Some(selector) = selector {
        LabelSelector::parse(selector)
            .map_err(|e| StartError::Config(format!("--cluster-definitions-selector: {}", e.message)))?;
    }
    let names: Vec<String> =
        args.cluster_definitions.iter().map(|n| n.trim().to_string()).filter(|n| !n.is_empty()).collect();
    if let Some(bad) = names.iter().find(|n| !n.contains('.')) {
        return Err(StartError::Config(format!(
            "--cluster-definitions: \"{bad}\" is not a CustomResourceDefinition name (<plural>.<group>)"
        )));
    }
    Ok(Wanted { selector: selector.map(str::to_string), names })
}

/// Starts following the definitions the flags name; `None` when they name none.
pub fn start(
    args: &ServeArgs,
    cluster: Option<::kube::Client>,
    informers: &Informers,
) -> Result<Option<Arc<ClusterDefinitions>>, StartError> {
    let wanted = wanted(args)?;
    if wanted.is_empty() {
        return Ok(None);
    }
    let Some(client) = cluster else {
        return Err(StartError::Config(
            "--cluster-definitions-selector and --cluster-definitions read the main apiserver: give --kubeconfig (or run in a cluster)".into(),
        ));
    };
    let synced = informers.flag("*v1.CustomResourceDefinition");
    tracing::info!(
        selector = wanted.selector.as_deref().unwrap_or_default(),
        names = %wanted.names.join(","),
        "serving the main apiserver's CustomResourceDefinitions besides the files"
    );
    Ok(Some(ClusterDefinitions::start(client, &wanted, move || synced.mark())))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn wanted_from(args: &[&str]) -> Result<Wanted, String> {
        let flags =
            Flags::try_parse_from(std::iter::once("x").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        wanted(&flags.serve).map_err(|e| e.to_string())
    }

    #[test]
    fn the_flags_are_checked() {
        let wanted = wanted_from(&[
            "--cluster-definitions-selector=crd-apiserver.io/serve in (true,yes)",
            "--cluster-definitions=a.example.com,b.example.com",
            "--cluster-definitions=c.example.com",
        ])
        .unwrap();
        assert_eq!(wanted.selector.as_deref(), Some("crd-apiserver.io/serve in (true,yes)"));
        assert_eq!(wanted.names, ["a.example.com", "b.example.com", "c.example.com"]);
        assert!(wanted_from(&[]).unwrap().is_empty());
        let bad = wanted_from(&["--cluster-definitions-selector=a in (b"]).unwrap_err();
        assert!(bad.starts_with("--cluster-definitions-selector: "), "{bad}");
        assert_eq!(
            wanted_from(&["--cluster-definitions=widgets"]).unwrap_err(),
            "--cluster-definitions: \"widgets\" is not a CustomResourceDefinition name (<plural>.<group>)"
        );
    }
}
