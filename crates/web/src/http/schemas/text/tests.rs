use regex::Regex;

use super::*;

/// The pattern of the text form of [`integer_like`], taken out of its schema.
fn text_pattern(min: u64, max: u64) -> Regex {
    let schema = serde_json::to_value(integer_like(min, max)).unwrap();
    Regex::new(schema["anyOf"][1]["pattern"].as_str().unwrap()).unwrap()
}

#[test]
fn number_patterns_match_exactly_their_range() {
    for (min, max) in [(0, 1), (1, 36_500), (0, 1_234), (7, 7), (5, 120)] {
        let pattern = text_pattern(min, max);
        for n in 0..=max * 2 + 20 {
            assert_eq!(
                pattern.is_match(&n.to_string()),
                (min..=max).contains(&n),
                "{n} in {min}..={max}"
            );
        }
    }
    let pattern = text_pattern(0, 31_536_000);
    for n in [0, 9, 10, 99_999, 31_535_999, 31_536_000] {
        assert!(pattern.is_match(&n.to_string()), "{n}");
    }
    for n in [31_536_001, 31_600_000, 99_999_999, 100_000_000] {
        assert!(!pattern.is_match(&n.to_string()), "{n}");
    }
}

#[test]
fn number_patterns_read_text_as_the_validator_does() {
    let pattern = text_pattern(0, 100);
    for accepted in [" 12 ", "+12", "0012", "-0", "\u{3000}7\t"] {
        assert!(pattern.is_match(accepted), "{accepted:?}");
        let parsed = accepted.trim().parse::<i64>().unwrap();
        assert!((0..=100).contains(&parsed));
    }
    for refused in ["", "1 2", "-1", "12a", "\u{1c}12", "١٢"] {
        assert!(!pattern.is_match(refused), "{refused:?}");
    }
}

#[test]
fn nonblank_text_is_what_a_required_field_takes() {
    let schema = serde_json::to_value(nonblank(10)).unwrap();
    let pattern = Regex::new(schema["pattern"].as_str().unwrap()).unwrap();
    for (text, taken) in [
        ("a", true),
        (" a ", true),
        ("\u{1c}", true),
        (" \t", false),
        ("\u{3000}", false),
        ("a\u{0}", false),
    ] {
        assert_eq!(pattern.is_match(text), taken, "{text:?}");
        assert_eq!(!text.trim().is_empty() && !text.contains('\0'), taken, "{text:?}");
    }
}
