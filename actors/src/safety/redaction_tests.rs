use pretty_assertions::assert_eq;

use super::*;

/// The whole matrix, one row per (classification, purpose), one letter per
/// mode in [`PrivacyMode::ALL`] order: Unspecified, NoStorage, NoTraining,
/// UsageDataTrainingAllowed, UsageCodebaseTrainingAllowed.
/// A allow, D digest, B basename, P placeholder.
const TABLE: [(Classification, Purpose, &str); 18] = [
    (Classification::Safe, Purpose::Logging, "AAAAA"),
    (Classification::Safe, Purpose::Usage, "AAAAA"),
    (Classification::Safe, Purpose::Training, "AAAAA"),
    (Classification::Code, Purpose::Logging, "DDDDA"),
    (Classification::Code, Purpose::Usage, "DDAAA"),
    (Classification::Code, Purpose::Training, "PPPPA"),
    (Classification::Credentials, Purpose::Logging, "PPPPP"),
    (Classification::Credentials, Purpose::Usage, "PPPPP"),
    (Classification::Credentials, Purpose::Training, "PPPPP"),
    (Classification::Path, Purpose::Logging, "BBAAA"),
    (Classification::Path, Purpose::Usage, "BBAAA"),
    (Classification::Path, Purpose::Training, "PPPPA"),
    (Classification::ProviderInfo, Purpose::Logging, "AAAAA"),
    (Classification::ProviderInfo, Purpose::Usage, "AAAAA"),
    (Classification::ProviderInfo, Purpose::Training, "PPPAA"),
    (Classification::Unspecified, Purpose::Logging, "PPPPP"),
    (Classification::Unspecified, Purpose::Usage, "PPPPP"),
    (Classification::Unspecified, Purpose::Training, "PPPPP"),
];

fn letter(decision: Decision) -> char {
    match decision {
        Decision::Allow => 'A',
        Decision::Redact { form } => match form {
            RedactedForm::Digest => 'D',
            RedactedForm::Basename => 'B',
            RedactedForm::Placeholder => 'P',
        },
    }
}

/// How much of the value a decision reveals, least first.
fn leakage(decision: Decision) -> u8 {
    match decision {
        Decision::Redact {
            form: RedactedForm::Placeholder,
        } => 0,
        Decision::Redact {
            form: RedactedForm::Digest,
        } => 1,
        Decision::Redact {
            form: RedactedForm::Basename,
        } => 2,
        Decision::Allow => 3,
    }
}

#[test]
fn decision_table_is_exactly_the_documented_one() {
    let mut rows = Vec::new();
    for class in Classification::ALL {
        for purpose in Purpose::ALL {
            let letters: String = PrivacyMode::ALL
                .iter()
                .map(|&mode| letter(decide(mode, purpose, class)))
                .collect();
            rows.push((class, purpose, letters));
        }
    }
    let expected: Vec<(Classification, Purpose, String)> = TABLE
        .iter()
        .map(|&(c, p, l)| (c, p, l.to_owned()))
        .collect();
    assert_eq!(rows, expected);
}

#[test]
fn the_all_lists_hold_every_variant_once() {
    // A new variant breaks these matches, and then the length checks.
    let class_index = |c: Classification| match c {
        Classification::Safe => 0,
        Classification::Code => 1,
        Classification::Credentials => 2,
        Classification::Path => 3,
        Classification::ProviderInfo => 4,
        Classification::Unspecified => 5,
    };
    let mode_index = |m: PrivacyMode| match m {
        PrivacyMode::Unspecified => 0,
        PrivacyMode::NoStorage => 1,
        PrivacyMode::NoTraining => 2,
        PrivacyMode::UsageDataTrainingAllowed => 3,
        PrivacyMode::UsageCodebaseTrainingAllowed => 4,
    };
    let purpose_index = |p: Purpose| match p {
        Purpose::Logging => 0,
        Purpose::Usage => 1,
        Purpose::Training => 2,
    };
    assert_eq!(Classification::ALL.map(class_index), [0, 1, 2, 3, 4, 5]);
    assert_eq!(PrivacyMode::ALL.map(mode_index), [0, 1, 2, 3, 4]);
    assert_eq!(Purpose::ALL.map(purpose_index), [0, 1, 2]);
}

#[test]
fn credentials_and_unclassified_data_never_reach_storage() {
    for mode in PrivacyMode::ALL {
        for purpose in Purpose::ALL {
            for class in [Classification::Credentials, Classification::Unspecified] {
                let stored = decide(mode, purpose, class).apply(class, "sk-live-123");
                assert_eq!(
                    stored,
                    format!("[{}]", class.label()),
                    "{mode:?} {purpose:?}"
                );
            }
        }
    }
}

#[test]
fn strict_modes_never_train_on_anything_but_safe_data() {
    for mode in [
        PrivacyMode::Unspecified,
        PrivacyMode::NoStorage,
        PrivacyMode::NoTraining,
    ] {
        for class in Classification::ALL {
            let allowed = decide(mode, Purpose::Training, class) == Decision::Allow;
            assert_eq!(allowed, class == Classification::Safe, "{mode:?} {class:?}");
        }
    }
}

#[test]
fn unspecified_mode_is_as_strict_as_no_storage() {
    for class in Classification::ALL {
        for purpose in Purpose::ALL {
            assert_eq!(
                decide(PrivacyMode::Unspecified, purpose, class),
                decide(PrivacyMode::NoStorage, purpose, class)
            );
        }
    }
}

#[test]
fn a_more_permissive_mode_never_reveals_less() {
    for class in Classification::ALL {
        for purpose in Purpose::ALL {
            let levels: Vec<u8> = PrivacyMode::ALL
                .iter()
                .map(|&mode| leakage(decide(mode, purpose, class)))
                .collect();
            assert!(
                levels.windows(2).all(|w| w[0] <= w[1]),
                "{class:?} {purpose:?}: {levels:?}"
            );
        }
    }
}

#[test]
fn forms_render_as_documented() {
    assert_eq!(
        RedactedForm::Placeholder.render(Classification::ProviderInfo, "openai"),
        "[provider-info]"
    );
    assert_eq!(
        RedactedForm::Digest.render(Classification::Code, "fn main() {}"),
        format!(
            "[code sha256:{} len=12]",
            &hex::encode(Sha256::digest(b"fn main() {}"))[..12]
        )
    );
    assert_eq!(
        RedactedForm::Basename.render(Classification::Path, "/home/ana/work/src/main.rs"),
        "…/main.rs"
    );
    assert_eq!(
        RedactedForm::Basename.render(Classification::Path, "main.rs"),
        "main.rs"
    );
    assert_eq!(
        RedactedForm::Basename.render(Classification::Path, "/"),
        "[path]"
    );
}

#[test]
fn equal_values_share_a_digest_and_different_ones_do_not() {
    let a = RedactedForm::Digest.render(Classification::Code, "let x = 1;");
    let b = RedactedForm::Digest.render(Classification::Code, "let x = 1;");
    let c = RedactedForm::Digest.render(Classification::Code, "let x = 2;");
    assert_eq!(a, b);
    assert!(a != c);
}

#[test]
fn allow_borrows_the_value() {
    let stored = Decision::Allow.apply(Classification::Safe, "42 tokens");
    assert!(matches!(stored, Cow::Borrowed("42 tokens")));
}

#[test]
fn classified_values_render_per_purpose_and_debug_safely() {
    let path = Classified::new(Classification::Path, "/home/ana/notes/plan.md");
    assert_eq!(
        path.render(PrivacyMode::NoTraining, Purpose::Logging),
        "/home/ana/notes/plan.md"
    );
    assert_eq!(
        path.render(PrivacyMode::NoStorage, Purpose::Logging),
        "…/plan.md"
    );
    assert_eq!(format!("{path:?}"), "…/plan.md");
    let key = Classified::new(Classification::Credentials, String::from("sk-live-123"));
    assert_eq!(format!("{key:?}"), "[credentials]");
}
