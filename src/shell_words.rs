//! A text as one word for a POSIX shell, for the commands the host and
//! the CLI print for a person to paste (a suggested `botfleet` command,
//! the `cp` that moves a workspace).

/// `s` as one word for a POSIX shell: as it is when it holds only
/// characters no shell reads specially, else in single quotes, each `'`
/// in it written `'\''`.
pub(crate) fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}
