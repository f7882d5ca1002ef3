//! Yii2's default attribute label (`Model::generateAttributeLabel` → `Inflector::camel2words`),
//! which names attributes in validation messages.

/// "created_at" → "Created At", "id_group" → "Id Group", "groupId" → "Group Id",
/// "HTMLParser" → "Html Parser".
pub(super) fn generate(name: &str) -> String {
    // A space goes before an uppercase letter preceded by a lowercase one (xY → x Y), and before
    // an uppercase letter preceded by a letter and followed by a lowercase one (XYz → X Yz).
    let chars: Vec<char> = name.chars().collect();
    let mut spaced = String::with_capacity(name.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev = i.checked_sub(1).and_then(|p| chars.get(p)).copied();
            let next = chars.get(i + 1).copied();
            let after_lower = prev.is_some_and(char::is_lowercase);
            let starts_word = prev.is_some_and(char::is_alphabetic) && next.is_some_and(char::is_lowercase);
            if after_lower || starts_word {
                spaced.push(' ');
            }
        }
        spaced.push(match c {
            '-' | '_' | '.' => ' ',
            c => c,
        });
    }
    let lower = spaced.trim().to_lowercase();
    // StringHelper::mb_ucwords: the first letter of every word in upper case.
    let mut out = String::with_capacity(lower.len());
    let mut at_word_start = true;
    for c in lower.chars() {
        if at_word_start && !c.is_whitespace() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        at_word_start = c.is_whitespace();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::generate;

    #[test]
    fn labels_like_yii() {
        for (name, label) in [
            ("id", "Id"),
            ("created_at", "Created At"),
            ("id_group", "Id Group"),
            ("groupId", "Group Id"),
            ("weight", "Weight"),
            ("per-page", "Per Page"),
            ("a.b", "A B"),
            ("HTMLParser", "Html Parser"),
            ("serial_hardware", "Serial Hardware"),
            ("_x_", "X"),
            ("", ""),
        ] {
            assert_eq!(generate(name), label, "{name}");
        }
    }
}
