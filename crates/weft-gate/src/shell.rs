//! A shell command line cut into the simple commands it would run, for the guard.
//!
//! Not a shell: enough of one to see through what agents write. Lists and pipelines
//! (`;`, `&&`, `||`, `|`, `&`, newlines, subshells) are split outside quotes; command
//! substitutions (`$(…)`, backticks) are looked into even inside double quotes; words are
//! split by [`shlex`] (POSIX quoting); wrappers are peeled (`VAR=x`, `env`, `sudo`, `command`,
//! `exec`, `nohup`, `time`, `nice`, `timeout`, `xargs`, `sh -c '…'`, `bash -lc "…"`,
//! `eval …`). A line shlex cannot split (an unbalanced quote, a heredoc body) falls back to
//! whitespace words with the quote characters dropped, so a dangerous word is still seen.

/// How deep wrappers and substitutions are followed.
const MAX_DEPTH: usize = 8;

/// Every simple command of `line`, as words, wrappers removed.
pub(crate) fn simple_commands(line: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    collect(line, 0, &mut out);
    out
}

fn collect(line: &str, depth: usize, out: &mut Vec<Vec<String>>) {
    if depth > MAX_DEPTH {
        return;
    }
    let mut nested = Vec::new();
    for segment in segments(line, &mut nested) {
        let words = split_words(&segment);
        if !words.is_empty() {
            unwrap(words, depth, out);
        }
    }
    for inner in nested {
        collect(&inner, depth + 1, out);
    }
}

/// Splits at list and pipeline operators outside quotes; substitutions go to `nested`
/// (and leave a placeholder word behind).
fn segments(line: &str, nested: &mut Vec<String>) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut segments = Vec::new();
    let mut current = String::new();
    let (mut single, mut double) = (false, false);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if single {
            current.push(c);
            if c == '\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        match c {
            '\\' => {
                current.push(c);
                if let Some(&next) = chars.get(i + 1) {
                    current.push(next);
                }
                i += 2;
                continue;
            }
            '\'' if !double => single = true,
            '"' => double = !double,
            '$' if chars.get(i + 1) == Some(&'(') => {
                let (inner, end) = balanced(&chars, i + 2);
                nested.push(inner);
                current.push_str(" __subst__ ");
                i = end + 1;
                continue;
            }
            '`' => {
                let end = chars[i + 1..]
                    .iter()
                    .position(|&c| c == '`')
                    .map_or(chars.len(), |p| i + 1 + p);
                nested.push(chars[i + 1..end.min(chars.len())].iter().collect());
                current.push_str(" __subst__ ");
                i = end + 1;
                continue;
            }
            ';' | '|' | '\n' | '(' | ')' if !double => {
                segments.push(std::mem::take(&mut current));
                i += 1;
                continue;
            }
            '&' if !double => {
                // `2>&1` and `&>file` are redirections, not the background operator.
                let prev = i.checked_sub(1).map(|p| chars[p]);
                let next = chars.get(i + 1).copied();
                if prev != Some('>') && prev != Some('<') && next != Some('>') {
                    segments.push(std::mem::take(&mut current));
                    i += 1;
                    continue;
                }
            }
            _ => {}
        }
        current.push(c);
        i += 1;
    }
    segments.push(current);
    segments.retain(|s| !s.trim().is_empty());
    segments
}

/// The text from `start` to the `)` that closes the `$(` before it, and that `)`'s index.
fn balanced(chars: &[char], start: usize) -> (String, usize) {
    let mut depth = 1;
    let (mut single, mut double) = (false, false);
    let mut i = start;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' if !single => i += 1,
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '(' if !single && !double => depth += 1,
            ')' if !single && !double => {
                depth -= 1;
                if depth == 0 {
                    return (chars[start..i].iter().collect(), i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    (
        chars[start.min(chars.len())..].iter().collect(),
        chars.len(),
    )
}

fn split_words(segment: &str) -> Vec<String> {
    shlex::split(segment).unwrap_or_else(|| {
        segment
            .split_whitespace()
            .map(|w| w.replace(['\'', '"'], ""))
            .filter(|w| !w.is_empty())
            .collect()
    })
}

/// The program's name without its directory (`/usr/bin/git` → `git`).
pub(crate) fn program(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// Peels wrappers off one simple command; pushes what really runs.
fn unwrap(mut words: Vec<String>, depth: usize, out: &mut Vec<Vec<String>>) {
    if depth > MAX_DEPTH {
        return;
    }
    while words.first().is_some_and(|w| is_assignment(w)) {
        words.remove(0);
    }
    let Some(first) = words.first() else {
        return;
    };
    let rest = |skip: usize| {
        words
            .get(skip..)
            .map(<[String]>::to_vec)
            .unwrap_or_default()
    };
    match program(first) {
        "env" => {
            let mut i = 1;
            while let Some(w) = words.get(i) {
                if w == "-S" || w == "--split-string" {
                    if let Some(line) = words.get(i + 1) {
                        collect(line, depth + 1, out);
                    }
                    return;
                }
                if matches!(w.as_str(), "-u" | "--unset" | "-C" | "--chdir") {
                    i += 2;
                } else if w.starts_with('-') || is_assignment(w) {
                    i += 1;
                } else {
                    break;
                }
            }
            unwrap(rest(i), depth + 1, out);
        }
        "sudo" | "doas" => {
            let mut i = 1;
            while let Some(w) = words.get(i) {
                if w == "--" {
                    i += 1;
                    break;
                }
                if matches!(
                    w.as_str(),
                    "-u" | "-g" | "-h" | "-p" | "-C" | "-D" | "-r" | "-t" | "-U" | "-T"
                ) {
                    i += 2;
                } else if w.starts_with('-') {
                    i += 1;
                } else {
                    break;
                }
            }
            unwrap(rest(i), depth + 1, out);
        }
        "command" | "builtin" | "exec" | "nohup" | "time" | "noglob" | "stdbuf" | "ionice"
        | "nice" | "chronic" => {
            let mut i = 1;
            while let Some(w) = words.get(i) {
                if matches!(w.as_str(), "-n" | "-a" | "-c") && program(first) != "command" {
                    i += 2;
                } else if w.starts_with('-') {
                    i += 1;
                } else {
                    break;
                }
            }
            unwrap(rest(i), depth + 1, out);
        }
        "timeout" => {
            let mut i = 1;
            while let Some(w) = words.get(i) {
                if matches!(w.as_str(), "-s" | "-k" | "--signal" | "--kill-after") {
                    i += 2;
                } else if w.starts_with('-') {
                    i += 1;
                } else {
                    break;
                }
            }
            // The duration.
            unwrap(rest(i + 1), depth + 1, out);
        }
        "xargs" => {
            let mut i = 1;
            while let Some(w) = words.get(i) {
                if matches!(
                    w.as_str(),
                    "-I" | "-n" | "-P" | "-L" | "-d" | "-E" | "-s" | "-a"
                ) {
                    i += 2;
                } else if w.starts_with('-') {
                    i += 1;
                } else {
                    break;
                }
            }
            unwrap(rest(i), depth + 1, out);
        }
        "sh" | "bash" | "zsh" | "dash" | "ksh" | "ash" | "fish" => {
            // `bash -c 'cmd'`, `bash -lc "cmd"`, `sh -e -c cmd`.
            let mut i = 1;
            while let Some(w) = words.get(i) {
                if w.starts_with('-') && !w.starts_with("--") && w.contains('c') {
                    if let Some(line) = words.get(i + 1) {
                        collect(line, depth + 1, out);
                    }
                    return;
                }
                if w.starts_with('-') {
                    i += 1;
                } else {
                    break;
                }
            }
            out.push(words);
        }
        "eval" => collect(&words[1..].join(" "), depth + 1, out),
        _ => out.push(words),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn commands(line: &str) -> Vec<String> {
        simple_commands(line)
            .into_iter()
            .map(|w| w.join(" "))
            .collect()
    }

    #[test]
    fn lists_pipes_and_wrappers() {
        assert_eq!(
            commands("cd x && FOO=1 env -i BAR=2 sudo -u root git push -f; echo ok | cat"),
            ["cd x", "git push -f", "echo ok", "cat"]
        );
        assert_eq!(
            commands("bash -lc 'rm -rf / && echo hi'"),
            ["rm -rf /", "echo hi"]
        );
        assert_eq!(commands("sh -c \"git push --force\""), ["git push --force"]);
        assert_eq!(
            commands("echo \"$(git reset --hard)\" 2>&1"),
            ["echo  __subst__  2>&1", "git reset --hard"]
        );
        assert_eq!(commands("eval 'terraform apply'"), ["terraform apply"]);
        assert_eq!(commands("timeout 5 nohup git push -f"), ["git push -f"]);
        assert_eq!(commands("echo 'a;b' \"c|d\""), ["echo a;b c|d"]);
    }

    #[test]
    fn odd_input_does_not_panic() {
        for line in [
            "",
            "$(",
            "$((",
            "`",
            "\\",
            "'",
            "\"",
            "\"$(echo",
            "a\\",
            "&",
            "&&&",
            "|;|",
            "$()",
            "env",
            "env -S",
            "sudo",
            "sudo -u",
            "timeout",
            "xargs -I",
            "sh -c",
            "bash -lc",
            "eval",
            "(((",
            ")))",
            "2>&1",
            "$(a $(b `c` d) e)",
            "x=1",
            "\u{0}",
            "é'\"ü",
        ] {
            let _ = simple_commands(line);
        }
    }

    #[test]
    fn unbalanced_quotes_fall_back_to_words() {
        assert_eq!(
            commands("git push --force 'origin"),
            ["git push --force origin"]
        );
    }
}
