//! The report's exit codes, summary line, tables and JSON round trip.

use super::*;

fn report() -> Report {
    Report {
        definition: "crontabs.stable.example.com".into(),
        change: Acceptance { accepted: true, ..Acceptance::default() },
        objects: 10_000,
        versions: vec![VersionReport {
            name: "v1".into(),
            storage: true,
            failing: 37,
            newly_failing: 37,
            failing_unchanged: 0,
            errors: vec![ErrorGroup {
                field: "spec.replicas".into(),
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: spec.replicas in body should be less than or equal to 5".into(),
                objects: 37,
                tolerated_by_ratcheting: 37,
                examples: vec!["default/ct-00012".into(), "default/ct-00140".into()],
                first_error: "spec.replicas: Invalid value: 7: spec.replicas in body should be less than or equal to 5"
                    .into(),
            }],
            ..VersionReport::default()
        }],
        pruned: vec![PathCount { path: "spec.image".into(), objects: 3 }],
        storage: StorageReport {
            current_version: Some("v1".into()),
            version: "v1".into(),
            objects_per_version: [("v1".to_string(), 10_000)].into(),
            to_migrate: 0,
        },
        ..Report::default()
    }
}

#[test]
fn exit_codes_say_refused_then_failing_then_fine() {
    let mut report = report();
    assert_eq!(report.exit_code(), 1);
    report.change = Acceptance { accepted: false, message: Some("refused".into()), errors: vec![] };
    assert_eq!(report.exit_code(), 2);
    let mut fine = self::report();
    fine.versions[0].newly_failing = 0;
    assert_eq!(fine.exit_code(), 0);
    fine.conversion = Some(ConversionReport { webhook: Some("https://h".into()), failed: 1, errors: vec![] });
    assert_eq!(fine.exit_code(), 1);
}

#[test]
fn the_summary_counts_what_fails() {
    assert_eq!(
        report().summary(),
        "37 of 10000 objects would fail validation in v1 (37 newly, 0 even on an unchanged update)"
    );
}

#[test]
fn tables_line_up_and_wide_adds_examples() {
    let table = report().render_table(false);
    let expected = "\
DEFINITION: crontabs.stable.example.com  (10000 stored objects)  OBJECTS WOULD FAIL
CHANGE: accepted as a live update

VERSION   STORAGE   FAILING   NEW   FAILING-UNCHANGED
v1        true      37        37    0

VERSION   FIELD           ERROR                                                              OBJECTS   RATCHETED
v1        spec.replicas   Invalid value: spec.replicas in body should be less than or equal to 5   37        37
";
    assert!(table.starts_with(expected.lines().next().unwrap()), "{table}");
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines[3], "VERSION   STORAGE   FAILING   NEW   FAILING-UNCHANGED");
    assert_eq!(lines[4], "v1        true      37        37    0");
    assert!(lines[6].starts_with("VERSION   FIELD           ERROR"), "{table}");
    assert!(lines[7].starts_with("v1        spec.replicas   Invalid value: spec.replicas in body"), "{table}");
    assert!(lines[7].ends_with("37        37"), "{table}");
    assert!(table.contains("pruned   spec.image   3"), "{table}");
    assert!(table.contains("STORAGE: version v1; objects per stored version: v1=10000; to migrate: 0"), "{table}");
    assert!(!table.contains("ct-00012"), "{table}");
    let wide = report().render_table(true);
    assert!(wide.contains("CEL-COST-MAX"), "{wide}");
    assert!(wide.contains("default/ct-00012,default/ct-00140"), "{wide}");
}

#[test]
fn the_json_form_reads_back() {
    let report = report();
    let text = serde_json::to_string(&report).unwrap();
    assert!(text.contains("\"newlyFailing\":37"), "{text}");
    assert!(text.contains("\"toleratedByRatcheting\":37"), "{text}");
    assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), report);
}
