use super::*;

#[test]
fn masks_keep_the_scheme_and_a_short_tail() {
    assert_eq!(mask("Bearer abcdefghijklmnop1234"), "Bearer ****1234");
    assert_eq!(mask("ApiKey short"), "ApiKey ****");
    assert_eq!(mask("sekrit"), "****");
    assert_eq!(mask("averyveryverylongtokenwithoutscheme"), "****heme");
}
