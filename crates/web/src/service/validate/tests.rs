use super::*;

#[test]
fn labels_follow_yii() {
    assert_eq!(label_of("serial_hardware"), "Serial Hardware");
    assert_eq!(label_of("label"), "Label");
}

#[test]
fn reports_each_bad_field_once() {
    let body = serde_json::json!({"label": 5, "n": "x", "flag": "yes"});
    let map = body.as_object().unwrap();
    let mut f = Fields::new(map);
    assert_eq!(f.string("label", true, 10), None);
    assert_eq!(f.integer("n", false, 0, 10), None);
    assert_eq!(f.boolean("flag"), None);
    assert_eq!(f.string("missing", true, 10), None);
    let Err(ServiceError::Invalid(list)) = f.finish() else {
        panic!("expected errors")
    };
    let messages: Vec<_> = list.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "Label must be a string.",
            "N must be an integer.",
            "Flag must be either \"1\" or \"0\".",
            "Missing cannot be blank."
        ]
    );
}

#[test]
fn refuses_nul_in_text_on_every_store() {
    let body = serde_json::json!({"label": "a\u{0}b"});
    let mut f = Fields::new(body.as_object().unwrap());
    assert_eq!(f.string("label", false, 10), None);
    let Err(ServiceError::Invalid(list)) = f.finish() else {
        panic!("expected errors")
    };
    assert_eq!(list[0].message, "Label must not contain NUL characters.");
}

#[test]
fn an_integral_float_is_an_integer_as_in_yii() {
    let body = serde_json::json!({"days": 7045.0, "half": 2.5});
    let mut f = Fields::new(body.as_object().unwrap());
    assert_eq!(f.integer("days", true, 1, 36_500), Some(7045));
    assert_eq!(f.integer("half", true, 1, 36_500), None);
}

#[test]
fn a_code_sent_as_an_integral_float_is_its_integer_text() {
    let body = serde_json::json!({"type": 1.0, "other": 1.5});
    let mut f = Fields::new(body.as_object().unwrap());
    assert_eq!(f.code("type").as_deref(), Some("1"));
    assert_eq!(f.code("other"), None);
}
