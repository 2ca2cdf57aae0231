//! Words of a POSIX shell's command line, for the commands the CLI prints for a
//! person to run.

/// `word` as one word of a POSIX shell command: as it is when it holds no character
/// the shell treats specially, single-quoted otherwise.
pub(super) fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn paths_with_spaces_or_quotes_stay_one_shell_word() {
        assert_eq!(shell_word("/opt/justonce/wit"), "/opt/justonce/wit");
        assert_eq!(shell_word("/My Tools/wit"), "'/My Tools/wit'");
        assert_eq!(shell_word("/a'b"), r"'/a'\''b'");
        assert_eq!(shell_word(""), "''");
    }
}
