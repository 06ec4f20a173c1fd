//! The text of a message as it is kept: what a person or a bot sent,
//! without the blank lines around it, but with the first line's
//! indentation (a pasted code block or a quoted poem starts indented;
//! a plain `trim` cut it, QA).

/// `text` without trailing white space and without leading blank lines;
/// the indentation of its first non-blank line stays.
pub fn message_text(text: &str) -> &str {
    let text = text.trim_end();
    let blank = text.len() - text.trim_start().len();
    match text[..blank].rfind('\n') {
        Some(end) => &text[end + 1..],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::message_text;

    #[test]
    fn keeps_the_first_lines_indentation() {
        assert_eq!(message_text("    def f():\n"), "    def f():");
        assert_eq!(message_text("\n \r\n\t  x = 1\n  y\n\n"), "\t  x = 1\n  y");
        assert_eq!(message_text("plain"), "plain");
        assert_eq!(message_text("  \u{3000}全角\n"), "  \u{3000}全角");
        assert_eq!(message_text(" \n\t\n "), "");
        assert_eq!(message_text(""), "");
    }
}
