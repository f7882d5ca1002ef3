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
