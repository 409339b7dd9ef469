//! Params of ValidatingAdmissionPolicies read from the main apiserver (answering
//! `admission::policy::ParamSource`): the kind is found by discovery once and remembered, the
//! objects are read live (get by name, or list by label selector) as unstructured JSON.

use std::collections::HashMap;
use std::sync::Mutex;

use ::kube::api::{Api, ApiResource, DynamicObject, ListParams};
use ::kube::core::GroupVersionKind;
use ::kube::discovery::{Scope, pinned_kind};
use futures_util::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde_json::Value;

use super::describe;
use crate::admission::policy::ParamSource;

pub struct ClusterParams {
    client: ::kube::Client,
    /// (apiVersion, kind) -> the resource and whether it is namespaced.
    kinds: Mutex<HashMap<(String, String), (ApiResource, bool)>>,
}

impl ClusterParams {
    pub fn new(client: ::kube::Client) -> ClusterParams {
        ClusterParams { client, kinds: Mutex::new(HashMap::new()) }
    }

    async fn resource(&self, api_version: &str, kind: &str) -> Result<(ApiResource, bool), String> {
        let key = (api_version.to_string(), kind.to_string());
        if let Some(found) = self.kinds.lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(found.clone());
        }
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (resource, capabilities) = pinned_kind(&self.client, &gvk).await.map_err(|e| describe(&e))?;
        let found = (resource, capabilities.scope == Scope::Namespaced);
        self.kinds.lock().unwrap_or_else(|p| p.into_inner()).insert(key, found.clone());
        Ok(found)
    }

    fn api(&self, resource: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
        match namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            None => Api::all_with(self.client.clone(), resource),
        }
    }
}

fn to_json(object: &DynamicObject) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|e| e.to_string())
}

/// A label selector in the query syntax (`a=b,c in (d),!e`).
fn selector_text(selector: &LabelSelector) -> String {
    let mut terms: Vec<String> = selector.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for expression in selector.match_expressions.iter().flatten() {
        let values = expression.values.clone().unwrap_or_default().join(",");
        terms.push(match expression.operator.as_str() {
            "In" => format!("{} in ({values})", expression.key),
            "NotIn" => format!("{} notin ({values})", expression.key),
            "Exists" => expression.key.clone(),
            _ => format!("!{}", expression.key),
        });
    }
    terms.join(",")
}

impl ParamSource for ClusterParams {
    fn namespaced<'a>(&'a self, api_version: &'a str, kind: &'a str) -> BoxFuture<'a, Result<bool, String>> {
        Box::pin(async move { Ok(self.resource(api_version, kind).await?.1) })
    }

    fn get<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Value>, String>> {
        Box::pin(async move {
            let (resource, _) = self.resource(api_version, kind).await?;
            let found = self.api(&resource, namespace).get_opt(name).await.map_err(|e| describe(&e))?;
            found.as_ref().map(to_json).transpose()
        })
    }

    fn list<'a>(
        &'a self,
        api_version: &'a str,
        kind: &'a str,
        namespace: Option<&'a str>,
        selector: &'a LabelSelector,
    ) -> BoxFuture<'a, Result<Vec<Value>, String>> {
        Box::pin(async move {
            let (resource, _) = self.resource(api_version, kind).await?;
            let params = ListParams::default().labels(&selector_text(selector));
            let list = self.api(&resource, namespace).list(&params).await.map_err(|e| describe(&e))?;
            list.items.iter().map(to_json).collect()
        })
    }
}
