use super::csv_text;

#[test]
fn text_cells_never_start_a_formula() {
    assert_eq!(csv_text("GW-1"), "GW-1");
    assert_eq!(csv_text("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
    for lead in ["+1", "-1", "@a", "\tx"] {
        assert_eq!(csv_text(lead), format!("'{lead}"));
    }
    assert_eq!(csv_text("\rx"), "\"'\rx\"");
    assert_eq!(csv_text("a,b"), "\"a,b\"");
}
