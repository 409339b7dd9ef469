//! The report of an impact analysis: what it found, as JSON for pipelines (`-o json`, and the
//! `serveddefinitions` status) and as tables for people (`-o wide` adds examples and costs),
//! and the exit code that sums it up: 0 nothing breaks, 1 stored objects would fail, 2 the
//! change itself would be refused.
//!
//! Owns the report's shape and rendering; computes nothing from objects.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::candidate::Acceptance;
use super::evaluate::{Forms, Totals, VersionPlan};
use super::tally::{CostSummary, ErrorGroup, PathCount};
use crate::definitions::Definition;

/// Everything an analysis says.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The definition's name.
    pub definition: String,
    /// Whether the change would be accepted as a live update, and Kubernetes' refusal if not.
    pub change: Acceptance,
    /// Stored objects looked at.
    pub objects: u64,
    /// Objects whose stored bytes are not a JSON object.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<ErrorGroup>,
    /// Each served version of the candidate.
    pub versions: Vec<VersionReport>,
    /// Fields the next write of an object would drop, and in how many objects.
    pub pruned: Vec<PathCount>,
    /// Fields the next write would fill from defaults, and in how many objects.
    pub defaulted: Vec<PathCount>,
    /// Objects with pruned or defaulted paths beyond the ones listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlisted_path_objects: u64,
    /// CEL rules added, removed or changed, with their estimated costs.
    pub rules: Vec<RuleChange>,
    pub storage: StorageReport,
    /// The candidate's conversion webhook, called in dry run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversion: Option<ConversionReport>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One served version of the candidate.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionReport {
    pub name: String,
    pub storage: bool,
    /// Objects the candidate finds invalid when read in this version.
    pub failing: u64,
    /// Of those, the ones the current definition finds valid (or does not serve in it).
    pub newly_failing: u64,
    /// Of those, the ones an update leaving every field unchanged would fail on (errors
    /// ratcheting does not tolerate).
    pub failing_unchanged: u64,
    pub errors: Vec<ErrorGroup>,
    /// Failing objects whose errors fall beyond the groups listed.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ungrouped_objects: u64,
    /// The CEL rules' runtime cost per object under the candidate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_cost: Option<CostSummary>,
    /// The same under the current definition (when it serves this version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_cel_cost: Option<CostSummary>,
}

/// A CEL rule that the change adds, removes or changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RuleChange {
    /// The version and where the rule sits in its schema (`v1: openAPIV3Schema.properties[spec]
    /// .x-kubernetes-validations[0]`).
    pub location: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_rule: Option<String>,
    /// Estimated cost times the times the rule may run (`None`: not compiled, or absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_cost: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_estimated_cost: Option<u64>,
    /// Over Kubernetes' per-rule limit (such a definition is refused).
    pub over_limit: bool,
}

/// What storage-version migration the change implies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StorageReport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_version: Option<String>,
    pub version: String,
    /// Objects per version they are stored in now.
    pub objects_per_version: BTreeMap<String, u64>,
    /// Objects the migration would rewrite into `version` (stored in another).
    pub to_migrate: u64,
}

/// The candidate's conversion webhook in dry run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConversionReport {
    /// The webhook's URL (`None`: the `None` strategy failed, on a version it does not have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// Objects it failed to convert into some version.
    pub failed: u64,
    pub errors: Vec<ErrorGroup>,
}

impl Report {
    /// Puts a finished scan's totals together.
    pub fn new(forms: &Forms, change: Acceptance, totals: Totals) -> Report {
        let candidate = &forms.candidate;
        let plans = VersionPlan::of(forms);
        let versions = plans
            .iter()
            .zip(totals.versions)
            .map(|(plan, v)| VersionReport {
                name: plan.candidate.version.name.clone(),
                storage: plan.candidate.version.storage,
                failing: v.failing,
                newly_failing: v.newly_failing,
                failing_unchanged: v.failing_unchanged,
                ungrouped_objects: v.errors.overflow_objects,
                errors: v.errors.into_groups(),
                cel_cost: if has_rules(&plan.candidate.version) { v.candidate_cost.summary() } else { None },
                current_cel_cost: match &plan.current {
                    Some(current) if has_rules(&current.version) => v.current_cost.summary(),
                    _ => None,
                },
            })
            .collect();
        let to_migrate =
            totals.stored_versions.iter().filter(|(v, _)| **v != candidate.storage.name).map(|(_, n)| n).sum();
        let unconverted = totals.conversion_failures.overflow_objects;
        let conversion_errors = totals.conversion_failures.into_groups();
        let webhook = match &candidate.conversion {
            crate::definitions::conversion::Conversion::Webhook(hook) => {
                Some(crate::conversion::webhook::url_of(&hook.endpoint))
            }
            crate::definitions::conversion::Conversion::None => None,
        };
        let conversion = (webhook.is_some() || !conversion_errors.is_empty()).then(|| ConversionReport {
            webhook,
            failed: unconverted + conversion_errors.iter().map(|g| g.objects).sum::<u64>(),
            errors: conversion_errors,
        });
        Report {
            definition: candidate.name.clone(),
            change,
            objects: totals.objects,
            unreadable: totals.unreadable.into_groups(),
            versions,
            unlisted_path_objects: totals.pruned.overflow_objects + totals.defaulted.overflow_objects,
            pruned: totals.pruned.into_counts(),
            defaulted: totals.defaulted.into_counts(),
            rules: rule_changes(forms.current.as_deref(), candidate),
            storage: StorageReport {
                current_version: forms.current.as_ref().map(|d| d.storage.name.clone()),
                version: candidate.storage.name.clone(),
                objects_per_version: totals.stored_versions,
                to_migrate,
            },
            conversion,
        }
    }

    /// 2 when the change would be refused, 1 when stored objects would fail (newly invalid,
    /// unreadable, or not convertible), 0 otherwise.
    pub fn exit_code(&self) -> i32 {
        if !self.change.accepted {
            return 2;
        }
        let failing = self.versions.iter().any(|v| v.newly_failing > 0)
            || !self.unreadable.is_empty()
            || self.conversion.as_ref().is_some_and(|c| c.failed > 0);
        i32::from(failing)
    }

    /// A line that sums the report up (logs, the status).
    pub fn summary(&self) -> String {
        if let Some(message) = self.change.message.as_deref().filter(|_| !self.change.accepted) {
            return format!("the change would be refused: {message}");
        }
        let mut parts = Vec::new();
        for version in self.versions.iter().filter(|v| v.failing > 0) {
            parts.push(format!(
                "{} of {} objects would fail validation in {} ({} newly, {} even on an unchanged update)",
                version.failing, self.objects, version.name, version.newly_failing, version.failing_unchanged
            ));
        }
        if let Some(conversion) = self.conversion.as_ref().filter(|c| c.failed > 0) {
            parts.push(format!("{} objects fail conversion", conversion.failed));
        }
        if self.storage.to_migrate > 0 {
            parts.push(format!("{} objects to migrate into {}", self.storage.to_migrate, self.storage.version));
        }
        if parts.is_empty() { format!("none of {} stored objects would fail", self.objects) } else { parts.join("; ") }
    }

    /// The report as tables; `wide` adds each group's example objects and the CEL costs.
    pub fn render_table(&self, wide: bool) -> String {
        let mut out = String::new();
        let verdict = match self.exit_code() {
            2 => "REFUSED",
            1 => "OBJECTS WOULD FAIL",
            _ => "OK",
        };
        let _ = writeln!(out, "DEFINITION: {}  ({} stored objects)  {verdict}", self.definition, self.objects);
        match (&self.change.message, self.change.accepted) {
            (Some(message), false) => {
                let _ = writeln!(out, "CHANGE: refused: {message}");
            }
            _ => {
                let _ = writeln!(out, "CHANGE: accepted as a live update");
            }
        }
        let mut header = vec!["VERSION", "STORAGE", "FAILING", "NEW", "FAILING-UNCHANGED"];
        if wide {
            header.extend(["CEL-COST-MAX", "CEL-COST-P99", "CURRENT-MAX", "CURRENT-P99"]);
        }
        let mut rows = vec![header.iter().map(|s| s.to_string()).collect::<Vec<_>>()];
        for v in &self.versions {
            let mut row = vec![
                v.name.clone(),
                v.storage.to_string(),
                v.failing.to_string(),
                v.newly_failing.to_string(),
                v.failing_unchanged.to_string(),
            ];
            if wide {
                let cost = |c: &Option<CostSummary>, pick: fn(&CostSummary) -> u64| {
                    c.as_ref().map_or("-".to_string(), |c| pick(c).to_string())
                };
                row.extend([
                    cost(&v.cel_cost, |c| c.max),
                    cost(&v.cel_cost, |c| c.p99),
                    cost(&v.current_cel_cost, |c| c.max),
                    cost(&v.current_cel_cost, |c| c.p99),
                ]);
            }
            rows.push(row);
        }
        out.push('\n');
        out.push_str(&columns(&rows));
        let mut errors =
            vec![vec!["VERSION".to_string(), "FIELD".into(), "ERROR".into(), "OBJECTS".into(), "RATCHETED".into()]];
        if wide {
            if let Some(header) = errors.first_mut() {
                header.push("EXAMPLES".into());
            }
        }
        for v in &self.versions {
            for group in &v.errors {
                let mut row = vec![
                    v.name.clone(),
                    group.field.clone(),
                    group.message.clone(),
                    group.objects.to_string(),
                    group.tolerated_by_ratcheting.to_string(),
                ];
                if wide {
                    row.push(group.examples.join(","));
                }
                errors.push(row);
            }
            if v.ungrouped_objects > 0 {
                errors.push(vec![
                    v.name.clone(),
                    "...".into(),
                    "(more kinds of error)".into(),
                    v.ungrouped_objects.to_string(),
                    "-".into(),
                ]);
            }
        }
        if errors.len() > 1 {
            out.push('\n');
            out.push_str(&columns(&errors));
        }
        let mut paths = vec![vec!["WRITE".to_string(), "PATH".into(), "OBJECTS".into()]];
        paths.extend(self.pruned.iter().map(|p| vec!["pruned".into(), p.path.clone(), p.objects.to_string()]));
        paths.extend(self.defaulted.iter().map(|p| vec!["defaulted".into(), p.path.clone(), p.objects.to_string()]));
        if paths.len() > 1 {
            out.push('\n');
            out.push_str(&columns(&paths));
        }
        if !self.rules.is_empty() {
            let mut rules = vec![vec!["RULE".to_string(), "ESTIMATED-COST".into(), "CURRENT".into(), "TEXT".into()]];
            for rule in &self.rules {
                let cost = |c: Option<u64>| c.map_or("-".to_string(), |c| c.to_string());
                let mut estimated = cost(rule.estimated_cost);
                if rule.over_limit {
                    estimated.push_str(" (over the limit)");
                }
                let text = rule.rule.clone().or_else(|| rule.current_rule.clone().map(|r| format!("(removed) {r}")));
                rules.push(vec![
                    rule.location.clone(),
                    estimated,
                    cost(rule.current_estimated_cost),
                    text.unwrap_or_default(),
                ]);
            }
            out.push('\n');
            out.push_str(&columns(&rules));
        }
        let storage = &self.storage;
        let per_version: Vec<String> = storage.objects_per_version.iter().map(|(v, n)| format!("{v}={n}")).collect();
        let _ = writeln!(
            out,
            "\nSTORAGE: version {}{}; objects per stored version: {}; to migrate: {}",
            storage.version,
            storage
                .current_version
                .as_ref()
                .filter(|c| **c != storage.version)
                .map_or(String::new(), |c| format!(" (now {c})")),
            if per_version.is_empty() { "none".to_string() } else { per_version.join(", ") },
            storage.to_migrate
        );
        if let Some(conversion) = &self.conversion {
            let by = conversion.webhook.as_ref().map_or("the None strategy".to_string(), |w| format!("webhook {w}"));
            let _ = writeln!(out, "CONVERSION: {by}: {} objects fail", conversion.failed);
            for group in &conversion.errors {
                let examples = if wide { format!(" ({})", group.examples.join(",")) } else { String::new() };
                let _ = writeln!(out, "  {} objects: {}{examples}", group.objects, group.first_error);
            }
        }
        for group in &self.unreadable {
            let _ = writeln!(
                out,
                "UNREADABLE: {} objects: {} ({})",
                group.objects,
                group.message,
                group.examples.join(",")
            );
        }
        out
    }
}

fn has_rules(version: &crate::definitions::Version) -> bool {
    version.cel_rules.as_ref().is_some_and(|r| !r.is_empty())
}

/// Left-aligned columns, three spaces apart, as kubectl prints tables.
fn columns(rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = Vec::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            let width = cell.chars().count();
            match widths.get_mut(i) {
                Some(w) => *w = (*w).max(width),
                None => widths.push(width),
            }
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < row.len() {
                let pad = widths.get(i).copied().unwrap_or(0).saturating_sub(cell.chars().count()) + 3;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The rules of every version that the change adds, removes or changes, matched by where they
/// sit in the version's schema.
fn rule_changes(current: Option<&Definition>, candidate: &Definition) -> Vec<RuleChange> {
    let located = |definition: &Definition| -> BTreeMap<String, crate::cel::RuleSummary> {
        let mut out = BTreeMap::new();
        for version in &definition.versions {
            let Some(rules) = &version.cel_rules else { continue };
            for rule in rules.summaries() {
                let at = rule.location.as_str();
                let within = at.find("openAPIV3Schema").and_then(|i| at.get(i..)).unwrap_or(at);
                out.insert(format!("{}: {within}", version.name), rule);
            }
        }
        out
    };
    let now = current.map(located).unwrap_or_default();
    let next = located(candidate);
    let mut changes = Vec::new();
    for (location, rule) in &next {
        let before = now.get(location);
        if before.is_some_and(|b| b.rule == rule.rule && b.estimated_cost == rule.estimated_cost) {
            continue;
        }
        changes.push(RuleChange {
            location: location.clone(),
            rule: Some(rule.rule.clone()),
            current_rule: before.filter(|b| b.rule != rule.rule).map(|b| b.rule.clone()),
            estimated_cost: rule.estimated_cost,
            current_estimated_cost: before.and_then(|b| b.estimated_cost),
            over_limit: rule.estimated_cost.is_some_and(|c| c > crate::cel::STATIC_ESTIMATED_COST_LIMIT),
        });
    }
    for (location, rule) in now.iter().filter(|(l, _)| !next.contains_key(*l)) {
        changes.push(RuleChange {
            location: location.clone(),
            rule: None,
            current_rule: Some(rule.rule.clone()),
            estimated_cost: None,
            current_estimated_cost: rule.estimated_cost,
            over_limit: false,
        });
    }
    changes
}

#[cfg(test)]
mod tests;
